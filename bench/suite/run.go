// Package suite runs the benchmark scenarios against targets and checks what
// they left behind: one run with -verify (database and restored replica hold
// exactly the acknowledged writes), compare (one scenario against every
// target, one table), serve (single-row inserts against its targets) and list
// (LIST latency against object count).
//
// It imports the other bench packages, internal/minioproc, the replica
// packages (for list) and zombiezen's SQLite (to count restored copies).
package suite

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/bench/load"
	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
)

// RunOptions is one scenario against one target.
type RunOptions struct {
	Scenario *scenario.Scenario
	Target   scenario.Target
	Label    string // target name in reports
	VUs      int
	Duration time.Duration
	Requests int64
	Warmup   time.Duration
	Timeout  time.Duration
	Progress io.Writer // live progress, or nil
	Verify   bool
	// Restore, if set with Verify, rebuilds the target's replica into a
	// SQLite file to count it again.
	Restore      func(ctx context.Context, out string) error
	RestoreFrom  string
	RestoreCount string // count query on the restored copy (default Scenario.CountSQL)
	TempDir      string
}

// Outcome is a run's report plus the counts -verify and compare use.
type Outcome struct {
	Report *report.Report
	Result *load.Result
	Before int64
	Live   int64
}

// Run sets the scenario up, drives the load and, with Verify, checks the
// database and its restored replica hold exactly the acknowledged writes.
func Run(ctx context.Context, o RunOptions) (*Outcome, error) {
	s, t := o.Scenario, &o.Target
	if err := t.Setup(ctx, s); err != nil {
		return nil, fmt.Errorf("set up %s on %s: %w", s.Name, o.Label, err)
	}
	before, err := t.Count(ctx, s)
	if err != nil {
		return nil, err
	}
	res, rep, err := drive(ctx, o)
	if err != nil {
		return nil, err
	}
	out := &Outcome{Report: rep, Result: res, Before: before}
	live, err := t.Count(ctx, s)
	if err != nil {
		return out, fmt.Errorf("count after the run: %w", err)
	}
	out.Live = live
	if !o.Verify {
		return out, nil
	}
	v := &report.Verify{Before: before, Live: live, RestoreFrom: o.RestoreFrom}
	rep.Verify = v
	okLive, msg := within(live-before, res)
	v.OK, v.Message = okLive, "database: "+msg
	if o.Restore != nil {
		dir, err := os.MkdirTemp(o.TempDir, "sluice-bench-verify-")
		if err != nil {
			return out, err
		}
		defer os.RemoveAll(dir)
		restored := filepath.Join(dir, "restored.db")
		countSQL := o.RestoreCount
		if countSQL == "" {
			countSQL = s.CountSQL
		}
		var n int64
		err = o.Restore(ctx, restored)
		if err == nil {
			n, err = CountFile(restored, countSQL)
		}
		v.RestoreDone = true
		if err != nil {
			v.OK, v.RestoreError = false, err.Error()
			v.Message += "; restore FAILED: " + err.Error()
		} else {
			v.Restored = n
			okR, msgR := within(n-before, res)
			v.OK = v.OK && okR && n == live
			v.Message += fmt.Sprintf("; restored replica: %s (%d rows/value, live %d)", msgR, n, live)
		}
	}
	if !v.OK {
		return out, fmt.Errorf("verify %s on %s: %s", s.Name, o.Label, v.Message)
	}
	return out, nil
}

// drive runs the load of o's scenario on its target and reports it.
func drive(ctx context.Context, o RunOptions) (*load.Result, *report.Report, error) {
	s, t := o.Scenario, &o.Target
	reqs, err := t.Requests(s)
	if err != nil {
		return nil, nil, err
	}
	cfg := load.Config{
		VUs: o.VUs, Duration: o.Duration, Requests: o.Requests, Warmup: o.Warmup, Timeout: o.Timeout,
		Next: func(vu int, iter uint64) *load.Request { return reqs[(uint64(vu)+iter)%uint64(len(reqs))] },
	}
	if o.Progress != nil {
		var total int64
		cfg.OnSecond = func(sec load.Second) {
			total += sec.Requests
			fmt.Fprintf(o.Progress, "\r  %4.0fs  %9d requests  %8d req/s  p50 %-9s p99 %-9s failures %d   ",
				sec.At.Seconds(), total, sec.Requests, report.FormatMS(float64(sec.P50US)/1000), report.FormatMS(float64(sec.P99US)/1000), sec.Failures)
		}
	}
	res, err := load.Run(ctx, cfg)
	if o.Progress != nil {
		fmt.Fprint(o.Progress, "\r\033[K")
	}
	if err != nil {
		return nil, nil, err
	}
	return res, report.New(report.Meta{Scenario: s.Name, Description: s.Description, Target: o.Label, Protocol: t.Protocol, Warmup: o.Warmup}, res), nil
}

// runNoSetup drives the load without setting up or counting anything (the ceiling).
func runNoSetup(ctx context.Context, o RunOptions) (*report.Report, error) {
	_, rep, err := drive(ctx, o)
	return rep, err
}

// within checks that a count grew by exactly the acknowledged writes, or by
// up to the writes whose outcome is unknown on top of them.
func within(grew int64, r *load.Result) (bool, string) {
	lo, hi := r.AckedWrites, r.AckedWrites+r.UnknownWrites
	if r.UnknownWrites == 0 {
		return grew == lo, fmt.Sprintf("%d writes applied, %d acknowledged", grew, lo)
	}
	return grew >= lo && grew <= hi, fmt.Sprintf("%d writes applied, %d acknowledged + up to %d of unknown outcome", grew, lo, r.UnknownWrites)
}

// CountFile runs a count query on a SQLite file, read-only.
func CountFile(path, query string) (int64, error) {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	if err != nil {
		return 0, fmt.Errorf("open restored %s: %w", path, err)
	}
	defer conn.Close()
	var n int64
	err = sqlitex.ExecuteTransient(conn, query, &sqlitex.ExecOptions{ResultFunc: func(st *sqlite.Stmt) error { n = st.ColumnInt64(0); return nil }})
	if err != nil {
		return 0, fmt.Errorf("%s on restored %s: %w", query, path, err)
	}
	return n, nil
}
