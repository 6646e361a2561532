package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
)

// Target kinds compare knows, in table order.
var AllTargets = []string{"sluice-sync", "sluice-async", "sluice-none", "litestream", "mariadb", "file"}

// CompareOptions is compare's configuration.
type CompareOptions struct {
	Scenario string
	Targets  []string // default AllTargets
	VUs      int
	Duration time.Duration
	Warmup   time.Duration
	Sluice   string // the sluice binary
	Bench    string // the sluice-bench binary, whose ceiling-server is the ceiling target
	Out      io.Writer
	JSON     string // write every run's report here, if set
}

// Row is one line of compare's table.
type Row struct {
	Target    string
	Report    *report.Report
	DBExact   string // the live database holds exactly the acknowledged writes
	Survived  string // after a SIGKILL right after the load: did every acknowledged write survive a restore?
	Err       error
	Restored  int64
	Lost      int64
	Protected bool
}

// Compare runs one scenario against each target, crashes it with SIGKILL
// right after the load, restores its replica, and prints one table.
func Compare(ctx context.Context, o CompareOptions) ([]Row, error) {
	s, err := scenario.Get(o.Scenario)
	if err != nil {
		return nil, err
	}
	if len(o.Targets) == 0 {
		o.Targets = AllTargets
	}
	env, cleanup, err := startEnv(ctx, o.Sluice, o.Bench, "compare", o.Out)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }

	var rows []Row
	var reports []*report.Report
	for _, kind := range o.Targets {
		say("%s: %s…", s.Name, kind)
		row := compareOne(ctx, env, kind, s, o)
		if row.Err != nil {
			say("  %s: %v", row.Target, row.Err)
		}
		if row.Report != nil {
			reports = append(reports, row.Report)
		}
		rows = append(rows, row)
		if ctx.Err() != nil {
			break
		}
	}
	PrintTable(o.Out, s, o, rows)
	if o.JSON != "" {
		if err := writeJSONFile(o.JSON, reports); err != nil {
			return rows, err
		}
	}
	var failed []string
	for _, r := range rows {
		if r.Err != nil {
			failed = append(failed, r.Target)
		}
	}
	if len(failed) > 0 {
		return rows, fmt.Errorf("compare %s: %d of %d targets failed: %s", s.Name, len(failed), len(rows), strings.Join(failed, "; "))
	}
	return rows, nil
}

func startTarget(ctx context.Context, env *targets.Env, kind string) (*targets.Server, error) {
	switch kind {
	case "sluice-sync":
		return env.StartSluice(ctx, "sync")
	case "sluice-async":
		return env.StartSluice(ctx, "async")
	case "sluice-none":
		return env.StartSluice(ctx, "none")
	case "litestream":
		return env.StartPeerSQLite(ctx, true)
	case "mariadb":
		return env.StartPeerMariaDB(ctx)
	case "file":
		return env.StartPeerFile(ctx)
	case "ceiling":
		return env.StartCeiling(ctx)
	}
	return nil, fmt.Errorf("unknown target %q (known: %s, ceiling)", kind, strings.Join(AllTargets, ", "))
}

func compareOne(ctx context.Context, env *targets.Env, kind string, s *scenario.Scenario, o CompareOptions) Row {
	row := Row{Target: kind}
	srv, err := startTarget(ctx, env, kind)
	if err != nil {
		row.Err = err
		return row
	}
	row.Target = srv.Name
	crashed := false
	defer func() {
		if !crashed {
			srv.Stop()
		}
	}()
	out, err := Run(ctx, RunOptions{
		Scenario: s, Target: scenario.Target{BaseURL: srv.URL, DB: s.DB, Protocol: srv.Protocol}, Label: srv.Name,
		VUs: o.VUs, Duration: o.Duration, Warmup: o.Warmup,
	})
	if err != nil {
		row.Err = fmt.Errorf("%w\n%s", err, srv.Logs())
		return row
	}
	row.Report = out.Report
	ok, msg := within(out.Live-out.Before, out.Result)
	row.DBExact = "yes"
	if !ok {
		row.DBExact = "NO: " + msg
	}
	// A crash right after the load: whatever the replica holds now is what a
	// new machine would restore.
	srv.Crash()
	crashed = true
	if srv.Restore == nil {
		row.Survived = "n/a (no replica)"
		return row
	}
	restored := filepath.Join(env.Dir, fmt.Sprintf("restored-%s.db", kind))
	countSQL := s.CountSQL
	if srv.Protocol == scenario.Peer {
		countSQL = s.PeerCountSQL
	}
	n, err := int64(0), srv.Restore(ctx, s.DB, restored)
	if err == nil {
		n, err = CountFile(restored, countSQL)
	}
	if err != nil {
		row.Survived = "restore failed"
		row.Err = fmt.Errorf("restore after the crash: %w", err)
		return row
	}
	row.Restored = n
	acked := out.Before + out.Result.AckedWrites
	if n >= acked {
		row.Survived = fmt.Sprintf("yes (%d of %d)", out.Result.AckedWrites, out.Result.AckedWrites)
		row.Protected = true
	} else {
		row.Lost = acked - n
		row.Survived = fmt.Sprintf("NO: lost %d of %d", row.Lost, out.Result.AckedWrites)
	}
	return row
}

// PrintTable prints compare's table as a markdown summary.
func PrintTable(w io.Writer, s *scenario.Scenario, o CompareOptions, rows []Row) {
	fmt.Fprintf(w, "\nsluice bench compare %s — %s\n", s.Name, s.Description)
	fmt.Fprintf(w, "%d VUs, %s measured after a %s warm-up per target; %s, %d CPUs; replicas on a local MinIO; each target SIGKILLed right after its run, then restored\n\n",
		o.VUs, o.Duration, o.Warmup, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU())
	fmt.Fprintf(w, "| %-50s | %9s | %9s | %9s | %8s | %-38s |\n", "target", "req/s", "p50", "p99", "failures", "acknowledged writes survived a restore")
	fmt.Fprintf(w, "|%s|%s:|%s:|%s:|%s:|%s|\n", strings.Repeat("-", 52), strings.Repeat("-", 10), strings.Repeat("-", 10), strings.Repeat("-", 10), strings.Repeat("-", 9), strings.Repeat("-", 40))
	for _, r := range rows {
		if r.Report == nil {
			fmt.Fprintf(w, "| %-50s | %9s | %9s | %9s | %8s | %-38s |\n", r.Target, "-", "-", "-", "-", "error: "+firstLine(r.Err))
			continue
		}
		rep := r.Report
		surv := r.Survived
		if r.DBExact != "yes" {
			surv += "; database: " + r.DBExact
		}
		fmt.Fprintf(w, "| %-50s | %9.0f | %9s | %9s | %8d | %-38s |\n", r.Target, rep.Rate, report.FormatMS(rep.Latency.Med), report.FormatMS(rep.Latency.P99), rep.Requests-rep.OK, surv)
	}
	fmt.Fprintln(w)
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	l, _, _ := strings.Cut(err.Error(), "\n")
	if len(l) > 120 {
		l = l[:120] + "…"
	}
	return l
}

func writeJSONFile(path string, reports []*report.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(reports); err != nil {
		return err
	}
	return f.Close()
}
