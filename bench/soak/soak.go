// Package soak is `sluice-bench soak`: minutes of sustained single-row
// inserts against `sluice serve` (-durability sync or async) replicating to a local
// MinIO, on one database or spread over many. Every window it prints the
// acknowledged writes, errors and p99 beside the server's RSS, open
// descriptors and connections to the store, and the bucket's objects,
// level-0 files and level-0 backlog. It fails when a window acknowledges
// nothing or a resource keeps growing (rules in rule.go), then stops the
// server with SIGTERM, restores every database with `sluice restore` and
// checks that every acknowledged write is in the restored copies.
//
// It imports bench/load (the closed-loop generator), bench/targets (starting
// sluice serve), bench/scenario (creating the databases), internal/minioproc,
// compact (its schedule, to know when the bucket should have settled),
// replica (its layout) and zombiezen's SQLite (to read restored copies).
package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/load"
	"github.com/sluicedb/sluice/compact"
)

// Options configures a soak.
type Options struct {
	Sluice      string // the sluice binary (serve and restore run as child processes)
	Duration    time.Duration
	Connections int
	Databases   int
	Window      time.Duration // default 10s
	Warmup      time.Duration // left out of the growth rules (default 1m)
	WorkDir     string        // default: a temp dir, removed afterwards
	JSON        string        // write the report here too
	ServeConfig string        // sluice serve -config FILE (tuning under test)
	Durability  string        // sync (default) or async
	Out         io.Writer
}

// ErrFailed is returned when the soak ran and one of its checks failed; the
// output already says which.
var ErrFailed = errors.New("soak failed")

// table is the soak table: k is the client-chosen key (see acks.go).
const table = "soak"

const bucket = "soak"

// payload makes each row about the size of a small JSON document a web service stores.
var payload = strings.Repeat("sustained single-row insert; ", 4)

// Report is the soak's outcome (also written as JSON).
type Report struct {
	Duration    string    `json:"duration"`
	Connections int       `json:"connections"`
	Databases   int       `json:"databases"`
	WindowS     float64   `json:"window_s"`
	Windows     []Window  `json:"windows"`
	Verdicts    []Verdict `json:"verdicts"`
	Acked       int64     `json:"acknowledged_writes"`
	Failed      int64     `json:"failed_requests"`
	Unknown     int64     `json:"unknown_outcome_writes"`
	// Level-1+ files seen in the bucket over the run: how often compaction ran.
	CompactedFiles int      `json:"compacted_files_seen"`
	Level1Files    int      `json:"level1_files_seen"`
	SIGTERMExitS   float64  `json:"sigterm_to_exit_s"`
	ObjectsListed  int      `json:"objects_listed_at_end"`
	ObjectsCounted int      `json:"objects_counted_at_end"`
	RestoreS       float64  `json:"restore_s"`
	Check          Check    `json:"restore_check"`
	Failures       []string `json:"failures"`
	OK             bool     `json:"ok"`
}

// Window is one window of the run. Resource figures are the peak of
// once-a-second samples (process) or the value at the window's end (bucket).
type Window struct {
	Index      int           `json:"index"`
	End        time.Duration `json:"-"`
	EndS       float64       `json:"end_s"`
	Partial    bool          `json:"partial,omitempty"`
	Acked      int64         `json:"acked"`
	Errors     int64         `json:"errors"`
	P99MS      float64       `json:"p99_ms"`
	RSS        int64         `json:"rss_bytes"`
	GoMapped   int64         `json:"go_mapped_bytes"` // of RSS: the Go runtime's
	SQLiteMem  int64         `json:"sqlite_bytes"`    // of RSS: SQLite's allocations
	FDs        int           `json:"fds"`
	StoreConns int           `json:"store_conns"`
	Objects    int           `json:"objects"`
	L0Files    int           `json:"l0_files"`
	L0Backlog  int           `json:"l0_backlog"`
	Shipped    int64         `json:"l0_shipped"` // level-0 files shipped during the window
	ProbeError string        `json:"probe_error,omitempty"`
}

// Run runs the soak and prints its table and verdict to o.Out. It returns
// ErrFailed (wrapped with the first failure) when a check failed.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Duration <= 0 || o.Connections <= 0 || o.Databases <= 0 {
		return nil, fmt.Errorf("soak: -duration, -connections and -databases must be positive")
	}
	if o.Warmup < 0 {
		return nil, fmt.Errorf("soak: -warmup must not be negative")
	}
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
	switch o.Durability {
	case "":
		o.Durability = "sync"
	case "sync", "async":
	default:
		return nil, fmt.Errorf("soak: -durability must be sync or async, not %q", o.Durability)
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.WorkDir == "" {
		var err error
		if o.WorkDir, err = os.MkdirTemp("", "sluice-soak-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(o.WorkDir)
	}
	g, err := startRig(ctx, o)
	if err != nil {
		return nil, err
	}
	defer g.close()

	l1 := compact.DefaultLevels[0].Interval
	if o.ServeConfig != "" {
		fmt.Fprintf(o.Out, "sluice serve -config %s\n", o.ServeConfig)
	}
	fmt.Fprintf(o.Out, "sluice bench soak: %s of single-row inserts, %d connections, %d database(s), sluice serve -durability %s -> MinIO (%s)\n",
		fmtDur(o.Duration), o.Connections, o.Databases, o.Durability, g.srv.Replica)
	fmt.Fprintf(o.Out, "compaction: level 1 every %s, level 2 every %s (crossed about %d times); level-0 files kept %s after compaction\n",
		fmtDur(l1), fmtDur(compact.DefaultLevels[1].Interval), int(o.Duration/l1), fmtDur(compact.DefaultL0Retention))
	fmt.Fprintf(o.Out, "per %s window: peaks of once-a-second samples of /proc/%d (RSS, descriptors, established connections to MinIO's port %d); bucket counts at the window's end from MinIO's data directory\n\n",
		fmtDur(o.Window), g.srv.Pid(), g.minioPort)

	res, smp, err := drive(ctx, o, g)
	if err != nil {
		return nil, err
	}
	rep := &Report{Duration: o.Duration.String(), Connections: o.Connections, Databases: o.Databases, WindowS: o.Window.Seconds(),
		Windows: smp.windows, Acked: res.a.count(), Failed: res.r.FailedRequests(), Unknown: res.r.UnknownWrites}
	rep.CompactedFiles, rep.Level1Files = smp.compactedFiles()
	rep.checkWindows(o.Window)
	fmt.Fprintf(o.Out, "\nload: %d writes acknowledged, %d failed requests (%s), %d with an unknown outcome\n",
		rep.Acked, rep.Failed, failureKinds(res.r), rep.Unknown)
	fmt.Fprintln(o.Out, rep.slowest())
	fmt.Fprintf(o.Out, "compaction: %d files written above level 0 seen in the bucket, %d of them level 1 (%.1f per database)\n",
		rep.CompactedFiles, rep.Level1Files, float64(rep.Level1Files)/float64(len(g.names)))

	if err := g.stopAndCount(ctx, o.Out, rep); err != nil {
		return nil, err
	}
	g.restoreAndCheck(ctx, o.Out, rep, res.a)
	rep.Verdicts = judge(rep.Windows, o.Warmup, l1)
	rep.printVerdicts(o.Out, o.Warmup)

	rep.OK = len(rep.Failures) == 0
	if o.JSON != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.JSON, append(b, '\n'), 0o644); err != nil {
			return rep, err
		}
	}
	if !rep.OK {
		for _, f := range rep.Failures {
			fmt.Fprintf(o.Out, "FAIL: %s\n", f)
		}
		if tail := lastLines(g.srv.Logs(), 15); tail != "" {
			fmt.Fprintf(o.Out, "\nlast lines of the server's log:\n%s\n", tail)
		}
		return rep, fmt.Errorf("%w: %s", ErrFailed, rep.Failures[0])
	}
	judged := 0
	for _, v := range rep.Verdicts {
		if v.Judged {
			judged++
		}
	}
	fmt.Fprintf(o.Out, "\nPASS: every window acknowledged writes, the %d of %d resources judged stayed bounded, every acknowledged write was restored\n",
		judged, len(rep.Verdicts))
	return rep, nil
}

func (a *acks) count() int64 {
	var n int64
	for _, it := range a.acked {
		n += int64(len(it))
	}
	return n
}

func failureKinds(r *load.Result) string {
	if len(r.Failures) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range r.FailureKinds() {
		parts = append(parts, fmt.Sprintf("%s x%d", k, r.Failures[k]))
	}
	return strings.Join(parts, ", ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
