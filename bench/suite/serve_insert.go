package suite

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
)

// Targets of the insert comparison: sluice ≥ 2× go-sqlite3 + Litestream and
// ≥ 0.6× the ceiling.
const (
	TargetVsLitestream = 2.0
	TargetVsCeiling    = 0.6
)

// InsertResult holds the three runs of the insert comparison.
type InsertResult struct {
	Sluice, Ceiling, Litestream *report.Report
}

// ServeInsert is single-row inserts at o.InsertVUs connections against sluice
// serve (sync → MinIO), the ceiling and go-sqlite3 + Litestream; it prints
// the figures and the ratios.
func ServeInsert(ctx context.Context, env *targets.Env, o ServeOptions) (*InsertResult, error) {
	s, _ := scenario.Get("put-object")
	var err error
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }

	runOn := func(kind string) (*report.Report, error) {
		say("put-object, %d VUs, %s: %s…", o.InsertVUs, o.Duration, kind)
		srv, err := startTarget(ctx, env, kind)
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		t := scenario.Target{BaseURL: srv.URL, DB: s.DB, Protocol: srv.Protocol}
		opts := RunOptions{Scenario: s, Target: t, Label: srv.Name, VUs: o.InsertVUs, Duration: o.Duration, Warmup: o.Warmup}
		if kind == "ceiling" {
			return runCeiling(ctx, opts)
		}
		out, err := Run(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("%w\n%s", err, srv.Logs())
		}
		return out.Report, nil
	}
	var res InsertResult
	if res.Sluice, err = runOn("sluice-sync"); err != nil {
		return nil, err
	}
	if res.Ceiling, err = runOn("ceiling"); err != nil {
		return nil, err
	}
	if res.Litestream, err = runOn("litestream"); err != nil {
		return nil, err
	}

	say("\ninsert comparison — single-row JSON inserts (one POST per row), %d keep-alive connections, %s after a %s warm-up", o.InsertVUs, o.Duration, o.Warmup)
	say("%s, %d CPUs shared by the load generator and the server; replicas on a local MinIO\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU())
	say("| %-50s | %9s | %9s | %9s | %8s | %15s |", "target", "req/s", "p50", "p99", "failures", "generator cores")
	say("|%s|%s:|%s:|%s:|%s:|%s:|", dashes(52), dashes(10), dashes(10), dashes(10), dashes(9), dashes(16))
	for _, r := range []*report.Report{res.Sluice, res.Ceiling, res.Litestream} {
		say("| %-50s | %9.0f | %9s | %9s | %8d | %15.2f |", r.Target, r.Rate, report.FormatMS(r.Latency.Med), report.FormatMS(r.Latency.P99), r.Requests-r.OK, r.GeneratorCores)
	}
	vsLS, vsCeil := ratio(res.Sluice.Rate, res.Litestream.Rate), ratio(res.Sluice.Rate, res.Ceiling.Rate)
	say("")
	say("sluice / Litestream stack = %.2fx   (target >= %.1fx: %s)", vsLS, TargetVsLitestream, met(vsLS >= TargetVsLitestream))
	say("sluice / ceiling         = %.2fx   (target >= %.1fx: %s)", vsCeil, TargetVsCeiling, met(vsCeil >= TargetVsCeiling))
	say("(the load generator shares the CPUs with each server; its own use is in the last column)")
	return &res, nil
}

// runCeiling loads the trivial handler with the same request sluice gets.
func runCeiling(ctx context.Context, o RunOptions) (*report.Report, error) {
	o.Target.Protocol = scenario.JSON
	o.Target.DB = "ceiling"
	out, err := runNoSetup(ctx, o)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func dashes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}
