package suite

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sluicedb/sluice/bench/load"
	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
)

// latencyRounds is how many times the sync latency row alternates sluice
// writes and bare PUTs.
const latencyRounds = 3

// syncLatency measures sync writes at one connection beside bare conditional
// PUTs of the same size to the same MinIO, in alternating rounds on one
// server, so that both see the machine (and MinIO's background work) in the
// same state; it reports the medians of the rounds' p50s and p99s, then
// restores the database and counts the acknowledged writes.
func syncLatency(ctx context.Context, env *targets.Env, o ServeOptions) (ServeRow, error) {
	s, _ := scenario.Get("put-object")
	d := max(o.Duration/2, 2*time.Second)
	fmt.Fprintf(o.Out, "sync latency: 1 connection for %s, then bare conditional PUTs for %s, %d rounds…\n", d, d, latencyRounds)
	srv, err := env.StartSluice(ctx, "sync")
	if err != nil {
		return ServeRow{}, err
	}
	defer srv.Stop()
	fail := func(err error) (ServeRow, error) {
		return ServeRow{}, fmt.Errorf("sync latency: %w\n%s", err, srv.Logs())
	}
	t := scenario.Target{BaseURL: srv.URL, DB: s.DB, Protocol: scenario.JSON}
	if err := t.Setup(ctx, s); err != nil {
		return fail(err)
	}
	before, err := t.Count(ctx, s)
	if err != nil {
		return fail(err)
	}
	reqs, err := t.Requests(s)
	if err != nil {
		return fail(err)
	}
	m0, err := scrapeMetrics(ctx, srv.URL)
	if err != nil {
		return fail(err)
	}
	var (
		acked, unknown, failures int64
		rates, p50s, p99s        []float64
		putP50s, putP99s         []float64
	)
	size := 0
	for round := 1; round <= latencyRounds; round++ {
		warmup := o.Warmup
		if round > 1 {
			warmup = 500 * time.Millisecond // new connections, warm store connection
		}
		res, err := load.Run(ctx, load.Config{VUs: 1, Duration: d, Warmup: warmup, Next: func(int, uint64) *load.Request { return reqs[0] }})
		if err != nil {
			return fail(err)
		}
		rep := report.New(report.Meta{Scenario: s.Name, Target: "sync latency", Protocol: scenario.JSON, Warmup: warmup}, res)
		acked, unknown, failures = acked+res.AckedWrites, unknown+res.UnknownWrites, failures+rep.Requests-rep.OK
		rates, p50s, p99s = append(rates, rep.Rate), append(p50s, rep.Latency.Med), append(p99s, rep.Latency.P99)
		if size == 0 {
			m, err := scrapeMetrics(ctx, srv.URL)
			if err != nil {
				return fail(err)
			}
			size = 4096
			if n := m["sluice_objects_written_total"] - m0["sluice_objects_written_total"]; n > 0 {
				size = int((m["sluice_bytes_written_total"] - m0["sluice_bytes_written_total"]) / n)
			}
		}
		p50, p99, err := barePuts(ctx, env, size, d)
		if err != nil {
			return fail(err)
		}
		putP50s, putP99s = append(putP50s, p50), append(putP99s, p99)
	}
	m1, err := scrapeMetrics(ctx, srv.URL)
	if err != nil {
		return fail(err)
	}
	r := ServeRow{Group: "latency", Name: "sync latency, 1 db, 1 conn", Conns: 1, Databases: 1, Rate: median(rates),
		P50MS: median(p50s), P99MS: median(p99s), Failures: failures, Acked: acked}
	if w := m1["sluice_writes_acknowledged_total"] - m0["sluice_writes_acknowledged_total"]; w > 0 {
		r.PutsPer1k = (m1["sluice_store_put_requests"] - m0["sluice_store_put_requests"]) * 1000 / w
	}
	if r.Verified, r.VerifyOK, err = verifyRestored(ctx, env, srv, s, []scenario.Target{t}, []int64{before}, acked, unknown); err != nil {
		return fail(err)
	}
	p50, p99 := median(putP50s), median(putP99s)
	r.Reference = fmt.Sprintf("bare cond. PUT of %d B p50 %s p99 %s", size, fmtMS(p50), fmtMS(p99))
	r.Ratio = ratio(r.P50MS, p50)
	r.Target = fmt.Sprintf("p50 <= PUT p50 + %s", TargetLatencyOverPut)
	r.TargetMet = r.P50MS <= p50+float64(TargetLatencyOverPut.Microseconds())/1000
	r.Runs = rates
	return r, nil
}

// median of a non-empty slice (the upper one of an even count).
func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
