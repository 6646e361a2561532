// Package soak is `sluice bench soak`: minutes of sustained single-row
// inserts against `sluice serve -durability sync` replicating to a local
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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/bench/load"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/internal/minioproc"
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
	Out         io.Writer
}

// ErrFailed is returned when the soak ran and one of its checks failed; the
// output already says which.
var ErrFailed = errors.New("soak failed")

// table is the soak table: k is the client-chosen key (see acks.go).
const table = "soak"

const bucket = "soak"

// payload makes each row about the size of seed 001's JSON document.
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
	if o.Window <= 0 {
		o.Window = 10 * time.Second
	}
	if o.Warmup < 0 {
		return nil, fmt.Errorf("soak: -warmup must not be negative")
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	work := o.WorkDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "sluice-soak-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	}
	m, err := minioproc.Start(ctx, filepath.Join(work, "minio"))
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	if err := m.CreateBucket(ctx, bucket); err != nil {
		return nil, err
	}
	env := &targets.Env{Sluice: o.Sluice, Dir: work, MinIO: m, Bucket: bucket}
	srv, err := env.StartSluice(ctx, "sync")
	if err != nil {
		return nil, err
	}
	defer srv.Crash()
	u, err := url.Parse(srv.Replica)
	if err != nil {
		return nil, err
	}
	prefix := strings.Trim(u.Path, "/")
	minioPort, err := strconv.Atoi(strings.TrimPrefix(m.Endpoint[strings.LastIndex(m.Endpoint, ":"):], ":"))
	if err != nil {
		return nil, fmt.Errorf("MinIO endpoint %s: %w", m.Endpoint, err)
	}

	names := make([]string, o.Databases)
	for i := range names {
		names[i] = "soak"
		if o.Databases > 1 {
			names[i] = fmt.Sprintf("soak-%0*d", len(strconv.Itoa(o.Databases-1)), i)
		}
	}
	if err := createDatabases(ctx, srv.URL, names); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, srv.Logs())
	}

	l1 := compact.DefaultLevels[0].Interval
	fmt.Fprintf(o.Out, "sluice bench soak: %s of single-row inserts, %d connections, %d database(s), sluice serve -durability sync -> MinIO (%s)\n",
		fmtDur(o.Duration), o.Connections, o.Databases, srv.Replica)
	fmt.Fprintf(o.Out, "compaction: level 1 every %s, level 2 every %s (crossed about %d times); level-0 files kept %s after compaction\n",
		fmtDur(l1), fmtDur(compact.DefaultLevels[1].Interval), int(o.Duration/l1), fmtDur(compact.DefaultL0Retention))
	fmt.Fprintf(o.Out, "per %s window: peaks of once-a-second samples of /proc/%d (RSS, descriptors, established connections to MinIO's port %d); bucket counts at the window's end from MinIO's data directory\n\n",
		fmtDur(o.Window), srv.Pid(), minioPort)

	rep := &Report{Duration: o.Duration.String(), Connections: o.Connections, Databases: o.Databases, WindowS: o.Window.Seconds()}
	root := filepath.Join(m.Dir(), "data", bucket, prefix)
	res, smp, err := drive(ctx, o, srv.URL, names, srv.Pid(), minioPort, root)
	if err != nil {
		return nil, err
	}
	windows := smp.windows
	rep.Windows = windows
	rep.CompactedFiles, rep.Level1Files = smp.compactedFiles()
	rep.Acked, rep.Failed, rep.Unknown = res.a.count(), res.r.FailedRequests(), res.r.UnknownWrites
	fail := func(format string, args ...any) { rep.Failures = append(rep.Failures, fmt.Sprintf(format, args...)) }

	// Every window must acknowledge something (a run of silent windows is one failure).
	for i := 0; i < len(windows); i++ {
		w := windows[i]
		if w.Partial || w.Acked > 0 {
			continue
		}
		j, errs := i, w.Errors
		for j+1 < len(windows) && !windows[j+1].Partial && windows[j+1].Acked == 0 {
			j++
			errs += windows[j].Errors
		}
		which := fmt.Sprintf("window %d", w.Index)
		if j > i {
			which = fmt.Sprintf("windows %d-%d", w.Index, windows[j].Index)
		}
		fail("%s (%s-%s): no acknowledged writes (%d error answers; every other request still waiting)",
			which, fmtDur(w.End-o.Window), fmtDur(windows[j].End), errs)
		i = j
	}
	fmt.Fprintf(o.Out, "\nload: %d writes acknowledged, %d failed requests (%s), %d with an unknown outcome\n",
		rep.Acked, rep.Failed, failureKinds(res.r), rep.Unknown)
	fmt.Fprintf(o.Out, "compaction: %d files written above level 0 seen in the bucket, %d of them level 1 (%.1f per database)\n",
		rep.CompactedFiles, rep.Level1Files, float64(rep.Level1Files)/float64(len(names)))

	// Stop the server as an orchestrator would.
	took, err := srv.Terminate(2 * time.Minute)
	rep.SIGTERMExitS = took.Seconds()
	fmt.Fprintf(o.Out, "SIGTERM -> exit: %s\n", took.Round(time.Millisecond))
	if err != nil {
		fail("server: %v", err)
	}

	// The data directory's count, checked against a real LIST now that nothing changes.
	end, err := scanMinIO(root)
	if err != nil {
		return nil, err
	}
	listed, err := listObjects(ctx, m.Client(), bucket, prefix)
	if err != nil {
		return nil, err
	}
	rep.ObjectsCounted, rep.ObjectsListed = end.Objects, listed
	fmt.Fprintf(o.Out, "objects in the bucket at the end: %d by LIST, %d counted in MinIO's data directory\n", listed, end.Objects)
	if listed != end.Objects {
		fail("objects: LIST finds %d, MinIO's data directory %d: the per-window object counts are not trustworthy", listed, end.Objects)
	}

	// Restore every database with the real restore path and check every acknowledged write.
	start := time.Now()
	keys, err := restoreAll(ctx, srv, names, filepath.Join(work, "restored"))
	rep.RestoreS = time.Since(start).Seconds()
	if err != nil {
		fail("restore: %v", err)
	} else {
		rep.Check = res.a.check(keys, names)
		c := rep.Check
		fmt.Fprintf(o.Out, "restore of %d database(s) with `sluice restore`: %s; every acknowledged write present: %d of %d\n",
			len(names), time.Since(start).Round(time.Millisecond), c.Present, c.Acked)
		fmt.Fprintf(o.Out, "  restored rows %d: %d acknowledged, %d whose answer was an error or never came (at most %d allowed), %d foreign\n",
			c.Rows, c.Present, c.Unacked, rep.Unknown, c.Foreign)
		switch {
		case c.Acked == 0:
			fail("restore check: no write was acknowledged, nothing to check")
		case c.Present != c.Acked:
			fail("restore check: %d of %d acknowledged writes missing from the restored copies (first: %s)", c.Acked-c.Present, c.Acked, c.Missing)
		}
		if c.Foreign > 0 {
			fail("restore check: %d restored rows carry a key no client sent to that database", c.Foreign)
		}
		if c.Unacked > rep.Unknown {
			fail("restore check: %d restored rows were not acknowledged but only %d writes had an unknown outcome", c.Unacked, rep.Unknown)
		}
	}

	// Growth rules.
	rep.Verdicts = judge(windows, o.Warmup, l1)
	fmt.Fprintf(o.Out, "\nbounded? (windows from %s on; peaks compared as printed)\n", fmtDur(o.Warmup))
	for _, v := range rep.Verdicts {
		status := "ok  "
		switch {
		case !v.Judged:
			status = "n/a "
		case !v.OK:
			status = "FAIL"
			fail("%s is not bounded: %s", v.Resource, v.Detail)
		}
		fmt.Fprintf(o.Out, "  %s %-18s %s\n       rule: %s\n", status, v.Resource, v.Detail, v.Rule)
	}

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
		if tail := lastLines(srv.Logs(), 15); tail != "" {
			fmt.Fprintf(o.Out, "\nlast lines of the server's log:\n%s\n", tail)
		}
		return rep, fmt.Errorf("%w: %s", ErrFailed, rep.Failures[0])
	}
	fmt.Fprintln(o.Out, "\nPASS: every window acknowledged writes, every resource stayed bounded, every acknowledged write was restored")
	return rep, nil
}

// judge applies the rules to the windows.
func judge(windows []Window, warmup, l1 time.Duration) []Verdict {
	// Level-0 files stay in the bucket for L0Retention after compaction, so
	// the object count rightly grows until then.
	settled := warmup + compact.DefaultL0Retention + l1
	why := "after the warm-up"
	whyBucket := fmt.Sprintf("after the warm-up + %s of level-0 retention + one level-1 interval", fmtDur(compact.DefaultL0Retention))
	const mib = 1 << 20
	rules := []struct {
		g growth
		v func(Window) float64
	}{
		{growth{"RSS", warmup, 1.5, 64 * mib, mib, " MiB", why}, func(w Window) float64 { return float64(w.RSS) }},
		{growth{"descriptors", warmup, 1.5, 64, 1, "", why}, func(w Window) float64 { return float64(w.FDs) }},
		{growth{"store connections", warmup, 1.5, 32, 1, "", why}, func(w Window) float64 { return float64(w.StoreConns) }},
		{growth{"objects", settled, 1.5, 500, 1, "", whyBucket}, func(w Window) float64 { return float64(w.Objects) }},
		{growth{"level-0 files", settled, 1.5, 500, 1, "", whyBucket}, func(w Window) float64 { return float64(w.L0Files) }},
	}
	var out []Verdict
	for _, r := range rules {
		out = append(out, r.g.judge(windows, r.v))
	}
	backlog := ceiling{"level-0 backlog", warmup, 3 * l1, 100}
	out = append(out, backlog.judge(windows, func(w Window) float64 { return float64(w.L0Backlog) },
		func(w Window) float64 { return float64(w.Shipped) }))
	return out
}

func createDatabases(ctx context.Context, base string, names []string) error {
	s := &scenario.Scenario{Schema: []string{"CREATE TABLE IF NOT EXISTS " + table + " (k INTEGER PRIMARY KEY, body TEXT NOT NULL)"}}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     atomic.Int64
	)
	for range min(8, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				t := &scenario.Target{BaseURL: base, DB: names[i], Protocol: scenario.JSON}
				if err := t.Setup(ctx, s); err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// restoreAll restores every database into dir and reads its keys.
func restoreAll(ctx context.Context, srv *targets.Server, names []string, dir string) ([]map[int64]bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	keys := make([]map[int64]bool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(4, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				out := filepath.Join(dir, names[i]+".db")
				if err := srv.Restore(ctx, names[i], out); err != nil {
					errs[i] = fmt.Errorf("database %s: %w", names[i], err)
					continue
				}
				keys[i], errs[i] = readKeys(out)
				os.Remove(out)
			}
		}()
	}
	wg.Wait()
	return keys, errors.Join(errs...)
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

// insertBody is one insert of key k.
func insertBody(k int64) []byte {
	var b bytes.Buffer
	b.WriteString(`{"sql":"INSERT INTO ` + table + ` (k, body) VALUES (?, ?)","params":[`)
	b.WriteString(strconv.FormatInt(k, 10))
	b.WriteString(`,"` + payload + `"]}`)
	return b.Bytes()
}
