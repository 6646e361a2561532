package suite

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/bench/load"
	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/targets"
)

// writeRows are the write rows of `sluice-bench serve`.
type writeRows struct {
	rows []ServeRow
}

// writeRun is one write run's figures.
type writeRun struct {
	rep       *report.Report
	acked     int64
	putsPer1k float64
	uploads   float64 // PUTs sluice sent during the run
	fileBytes float64 // the mean size of the transaction files it shipped
	// CPU seconds over the same span as uploads: sluice serve's, MinIO's.
	sluiceCPU, storeCPU float64
	verified            string
	ok                  bool
}

// serveWrites runs single-row inserts on 1 and on many databases at each
// connection count, and the commit window row.
func serveWrites(ctx context.Context, env *targets.Env, o ServeOptions, want func(string) bool) (*writeRows, error) {
	type key struct{ dbs, conns int }
	runs := map[key]*writeRun{}
	var plan []key
	if want("writes") {
		for _, d := range o.Databases {
			for _, c := range o.Conns {
				plan = append(plan, key{d, c})
			}
		}
	}
	if want("window") {
		plan = append(plan, key{1, o.WindowConns})
	}
	for _, k := range plan {
		if runs[k] != nil {
			continue
		}
		r, err := runWrites(ctx, env, o, k.dbs, k.conns)
		if err != nil {
			return nil, err
		}
		runs[k] = r
	}
	out := &writeRows{}
	row := func(name string, dbs, conns int, r *writeRun) ServeRow {
		out := ServeRow{Group: "writes", Name: name, Conns: conns, Databases: dbs, Rate: r.rep.Rate, P50MS: r.rep.Latency.Med,
			P99MS: r.rep.Latency.P99, Failures: r.rep.Requests - r.rep.OK, PutsPer1k: r.putsPer1k, Acked: r.acked, Verified: r.verified, VerifyOK: r.ok}
		if r.uploads > 0 {
			out.SluiceCPUPerUploadMS = r.sluiceCPU * 1000 / r.uploads
			out.StoreCPUPerPutMS = r.storeCPU * 1000 / r.uploads
		}
		return out
	}
	if want("writes") {
		for _, d := range o.Databases {
			for _, c := range o.Conns {
				r := row(fmt.Sprintf("insert, %d %s, %d %s", d, plural(d, "db", "dbs"), c, plural(c, "conn", "conns")), d, c, runs[key{d, c}])
				if one := runs[key{1, c}]; d != 1 && one != nil {
					r.Reference = fmt.Sprintf("1 db, %d conns: %.0f/s", c, one.rep.Rate)
					r.Ratio = ratio(r.Rate, one.rep.Rate)
					if d == slices.Max(o.Databases) && c == slices.Max(o.Conns) { // the target row: 100 dbs, 500 conns by default
						r.Target = fmt.Sprintf(">= %.1fx, p99 <= %s", TargetManyVsOne, TargetManyP99)
						r.TargetMet = r.Ratio >= TargetManyVsOne && r.P99MS <= float64(TargetManyP99.Milliseconds())
						r.Bound = manyDatabasesBound(r, one.rep.Rate)
						if err := storeCeiling(ctx, env, o, &r, runs[key{d, c}]); err != nil {
							return nil, err
						}
					}
				}
				out.rows = append(out.rows, r)
			}
		}
	}
	if want("window") {
		without := runs[key{1, o.WindowConns}]
		with, err := runWrites(ctx, env, o, 1, o.WindowConns, "-commit-window", o.Window.String())
		if err != nil {
			return nil, err
		}
		r := row(fmt.Sprintf("insert, 1 db, %d conns, -commit-window %s", o.WindowConns, o.Window), 1, o.WindowConns, with)
		r.Group = "window"
		r.Reference = fmt.Sprintf("no window: %.1f PUT/1k, %.0f/s", without.putsPer1k, without.rep.Rate)
		if with.putsPer1k > 0 {
			r.Ratio = without.putsPer1k / with.putsPer1k
		}
		r.Target = fmt.Sprintf(">= %.0fx fewer PUTs", TargetWindowFewer)
		r.TargetMet = r.Ratio >= TargetWindowFewer
		// Each connection waits for its answer, so a group holds at most one
		// write per connection: one upload per WindowConns writes is the floor.
		floor := 1000 / float64(o.WindowConns)
		r.Bound = fmt.Sprintf("a group holds at most one write per connection: at %d connections the floor is %.1f PUT/1k, at most %.2fx fewer than without the window (%.1f)",
			o.WindowConns, floor, without.putsPer1k/floor, without.putsPer1k)
		out.rows = append(out.rows, r)
	}
	return out, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// runWrites starts a fresh sluice serve (sync → MinIO, extra flags), spreads
// single-row inserts from conns connections over dbs databases, and checks
// that every database, restored from MinIO, holds exactly what it
// acknowledged.
func runWrites(ctx context.Context, env *targets.Env, o ServeOptions, dbs, conns int, extra ...string) (*writeRun, error) {
	s, _ := scenario.Get("put-object")
	label := fmt.Sprintf("%d %s, %d %s %s", dbs, plural(dbs, "db", "dbs"), conns, plural(conns, "conn", "conns"), strings.Join(extra, " "))
	fmt.Fprintf(o.Out, "insert, %s, %s…\n", label, o.Duration)
	srv, err := env.StartSluice(ctx, "sync", extra...)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	fail := func(err error) (*writeRun, error) {
		return nil, fmt.Errorf("insert, %s: %w\n%s", label, err, srv.Logs())
	}
	ts := make([]scenario.Target, dbs)
	for i := range ts {
		name := s.DB
		if dbs > 1 {
			name = fmt.Sprintf("%s-%03d", s.DB, i)
		}
		ts[i] = scenario.Target{BaseURL: srv.URL, DB: name, Protocol: scenario.JSON}
	}
	before := make([]int64, dbs)
	if err := forEach(dbs, 8, func(i int) error {
		if err := ts[i].Setup(ctx, s); err != nil {
			return err
		}
		n, err := ts[i].Count(ctx, s)
		before[i] = n
		return err
	}); err != nil {
		return fail(err)
	}
	reqs := make([]*load.Request, dbs)
	for i := range ts {
		rs, err := ts[i].Requests(s)
		if err != nil {
			return fail(err)
		}
		reqs[i] = rs[0]
	}
	m0, err := scrapeMetrics(ctx, srv.URL)
	if err != nil {
		return fail(err)
	}
	cpu0, err := serveCPU(env, srv)
	if err != nil {
		return fail(err)
	}
	res, err := load.Run(ctx, load.Config{VUs: conns, Duration: o.Duration, Warmup: o.Warmup,
		Next: func(vu int, iter uint64) *load.Request { return reqs[vu%dbs] }})
	if err != nil {
		return fail(err)
	}
	m1, err := scrapeMetrics(ctx, srv.URL)
	if err != nil {
		return fail(err)
	}
	cpu1, err := serveCPU(env, srv)
	if err != nil {
		return fail(err)
	}
	run := &writeRun{rep: report.New(report.Meta{Scenario: s.Name, Target: label, Protocol: scenario.JSON, Warmup: o.Warmup}, res), acked: res.AckedWrites}
	run.uploads = m1["sluice_store_put_requests"] - m0["sluice_store_put_requests"]
	if n := m1["sluice_objects_written_total"] - m0["sluice_objects_written_total"]; n > 0 {
		run.fileBytes = (m1["sluice_bytes_written_total"] - m0["sluice_bytes_written_total"]) / n
	}
	run.sluiceCPU, run.storeCPU = (cpu1[0] - cpu0[0]).Seconds(), (cpu1[1] - cpu0[1]).Seconds()
	if w := m1["sluice_writes_acknowledged_total"] - m0["sluice_writes_acknowledged_total"]; w > 0 {
		run.putsPer1k = run.uploads * 1000 / w
	}
	run.verified, run.ok, err = verifyRestored(ctx, env, srv, s, ts, before, res.AckedWrites, res.UnknownWrites)
	if err != nil {
		return fail(err)
	}
	return run, nil
}

// verifyRestored counts every database live and restored from MinIO: each
// restored copy must hold what the live one holds, and the rows added since
// before must be the acknowledged writes (plus up to unknown ones).
func verifyRestored(ctx context.Context, env *targets.Env, srv *targets.Server, s *scenario.Scenario, ts []scenario.Target,
	before []int64, acked, unknown int64) (verified string, ok bool, err error) {
	dbs := len(ts)
	live, restored := make([]int64, dbs), make([]int64, dbs)
	dir, err := os.MkdirTemp(env.Dir, "verify-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(dir)
	if err := forEach(dbs, 4, func(i int) error {
		n, err := ts[i].Count(ctx, s)
		if err != nil {
			return err
		}
		live[i] = n
		out := filepath.Join(dir, ts[i].DB+".db")
		if err := srv.Restore(ctx, ts[i].DB, out); err != nil {
			return fmt.Errorf("restore %s: %w", ts[i].DB, err)
		}
		restored[i], err = CountFile(out, s.CountSQL)
		return err
	}); err != nil {
		return "", false, err
	}
	var grew, inBucket int64
	same := true
	for i := range live {
		grew += live[i] - before[i]
		inBucket += restored[i] - before[i]
		same = same && restored[i] == live[i]
	}
	okLive, _ := within(grew, &load.Result{AckedWrites: acked, UnknownWrites: unknown})
	if !okLive || !same {
		return fmt.Sprintf("MISSING: %d restored, %d live, %d acknowledged", inBucket, grew, acked), false, nil
	}
	return fmt.Sprintf("%d of %d restored", inBucket, acked), true, nil
}

// serveCPU is the CPU time sluice serve and MinIO have used so far.
func serveCPU(env *targets.Env, srv *targets.Server) ([2]time.Duration, error) {
	var out [2]time.Duration
	var err error
	if out[0], err = targets.CPUTime(srv.Pid()); err != nil {
		return out, err
	}
	out[1], err = targets.CPUTime(env.MinIO.Pid())
	return out, err
}

// manyDatabasesBound says what the many-databases row would need: the uploads
// per second the target rate takes at the row's writes per upload, and the
// cores that many uploads take at the CPU per upload measured in the row
// (sluice's and MinIO's; the load generator's not counted).
func manyDatabasesBound(r ServeRow, oneRate float64) string {
	perUpload := r.SluiceCPUPerUploadMS + r.StoreCPUPerPutMS
	if r.PutsPer1k <= 0 || perUpload <= 0 {
		return ""
	}
	writesPerUpload := 1000 / r.PutsPer1k
	need := TargetManyVsOne * oneRate / writesPerUpload
	return fmt.Sprintf("%d connections over %d databases put at most %d writes in one upload (%.1f here); CPU per upload: sluice %.2f ms + MinIO %.2f ms; %.1fx of 1 db (%.0f writes/s) needs %.0f uploads/s = %.1f cores of the %d",
		r.Conns, r.Databases, (r.Conns+max(r.Databases, 1)-1)/max(r.Databases, 1), writesPerUpload, r.SluiceCPUPerUploadMS, r.StoreCPUPerPutMS,
		TargetManyVsOne, TargetManyVsOne*oneRate, need, need*perUpload/1000, runtime.NumCPU())
}

// storeCeiling measures, on the row's MinIO right after the row, the most
// uploads of the row's file size the store takes with nothing else running,
// and adds to the row's bound how far the target's uploads are above it.
func storeCeiling(ctx context.Context, env *targets.Env, o ServeOptions, r *ServeRow, run *writeRun) error {
	if run.fileBytes <= 0 || r.PutsPer1k <= 0 {
		return nil
	}
	size := int(run.fileBytes)
	fmt.Fprintf(o.Out, "store ceiling: bare conditional PUTs of %d B for %s…\n", size, o.Duration/2)
	rate, inFlight, err := storePutRate(ctx, env, size, o.Duration/2)
	if err != nil {
		return err
	}
	r.StorePutsPerSec = rate
	need := TargetManyVsOne * (r.Rate / r.Ratio) * r.PutsPer1k / 1000
	verdict := fmt.Sprintf("enough for the %.0f uploads/s the target needs", need)
	if need > rate {
		verdict = fmt.Sprintf("%.1fx short of the %.0f uploads/s the target needs", need/rate, need)
	}
	r.Bound += fmt.Sprintf("; MinIO alone, %d bare conditional PUTs of %d B in flight (sluice's upload bound): %.0f PUT/s, %s",
		inFlight, size, rate, verdict)
	return nil
}

// forEach runs fn(i) for i in [0,n) on up to workers goroutines; the first error wins.
func forEach(n, workers int, fn func(int) error) error {
	var (
		mu    sync.Mutex
		first error
		next  int
		wg    sync.WaitGroup
	)
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// scrapeMetrics reads sluice's /metrics, summing each metric's series.
func scrapeMetrics(ctx context.Context, base string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			_, rest, ok = strings.Cut(line, "} ")
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}
