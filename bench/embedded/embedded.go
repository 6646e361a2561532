package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/internal/minioproc"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

// Options configure a run. Zero values get the defaults in brackets.
type Options struct {
	Sluice      string // the sluice binary
	WorkDir     string
	Client      string // "node" (@libsql/client) or "python" (PyPI libsql) [node]
	NodeModules string // where @libsql/client is installed
	Python      string // the python3 that has libsql [python3]
	Replicas    int    // embedded replicas, one process each [4]
	Rows        int    // rows in the database before the run [20000]
	RowBytes    int    // bytes of each row's value [100]
	Reads       int    // local point reads per replica [20000]
	HranaReads  int    // the same reads over Hrana per replica [1000]
	// Follow is how long the replicas sync in a loop while the writer
	// inserts (the lag) [10s]; WriteEvery paces the writer [20ms].
	Follow     time.Duration
	WriteEvery time.Duration
	EmptySyncs int // syncs per replica with nothing new [200]
	Commits    int // single-row commits before the one measured sync [100]
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Client == "" {
		o.Client = "node"
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	def(&o.Replicas, 4)
	def(&o.Rows, 20000)
	def(&o.RowBytes, 100)
	def(&o.Reads, 20000)
	def(&o.HranaReads, 1000)
	def(&o.EmptySyncs, 200)
	def(&o.Commits, 100)
	if o.Follow <= 0 {
		o.Follow = 10 * time.Second
	}
	if o.WriteEvery <= 0 {
		o.WriteEvery = 20 * time.Millisecond
	}
}

// The targets the run is judged against.
const (
	TargetReadRatio   = 100                  // local reads per second ≥ this × Hrana's, same client
	TargetEmptySync   = 2 * time.Millisecond // server time of a sync with nothing new
	TargetSyncOverPgs = 2.0                  // bytes a sync after Commits commits moves ≤ this × the changed pages' bytes
)

// Report is a run's figures (µs for latencies, ms for lag).
type Report struct {
	Client         string
	Replicas, Rows int
	DatabaseBytes  int64

	LocalP50us, LocalP99us, LocalPerSec float64
	HranaP50us, HranaP99us, HranaPerSec float64
	ReadRatio                           float64 // local per second / Hrana per second, per client (the lowest), all at once
	AloneLocalPerSec, AloneHranaPerSec  float64 // one client alone
	AloneRatio                          float64

	WritesAcked             int
	LagP50ms, LagP99ms      float64
	FollowSyncs             int
	FollowBytesPerSync      float64
	FollowServerUsPerSync   float64
	FollowServerCPUusPerReq float64

	EmptySyncs              int
	EmptySyncServerUs       float64 // mean server time of one empty sync
	EmptySyncCPUus          float64 // server CPU per empty sync
	EmptySyncClientP50ms    float64
	EmptySyncStoreRequests  float64 // bucket requests while the empty syncs ran (PUT counter, GETs not exported)
	CommitsSyncBytes        int64
	CommitsChangedPages     int
	CommitsSyncAnswers      string
	CommitsSyncBytesPerPage float64

	Verdicts []string
	Missed   int
}

const (
	rwToken = "bench-embedded-rw-0001"
	roToken = "bench-embedded-ro-0002"
	bucket  = "embedded"
)

// Run measures, printing as it goes to out.
func Run(ctx context.Context, o Options, out io.Writer) (*Report, error) {
	o.defaults()
	rep := &Report{Client: o.Client, Replicas: o.Replicas, Rows: o.Rows}
	mio, err := minioproc.Start(ctx, filepath.Join(o.WorkDir, "minio"))
	if err != nil {
		return nil, err
	}
	defer mio.Stop()
	if err := mio.CreateBucket(ctx, bucket); err != nil {
		return nil, err
	}
	env := &targets.Env{Sluice: o.Sluice, Dir: o.WorkDir, MinIO: mio, Bucket: bucket}
	srv, err := env.StartSluice(ctx, "sync", "-token", rwToken, "-token", roToken+":ro:app")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	c := &client{base: srv.URL, http: &http.Client{Timeout: 30 * time.Second}}

	// The database: Rows rows, created in one statement.
	if err := c.do("PUT", "/v1/databases/app", ""); err != nil {
		return nil, fmt.Errorf("create the database: %w\n%s", err, srv.Logs())
	}
	for _, q := range []string{
		"CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL)",
		fmt.Sprintf("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < %d) INSERT INTO t(id, v) SELECT x, hex(randomblob(%d)) FROM c", o.Rows, o.RowBytes/2),
	} {
		if _, err := c.query(q); err != nil {
			return nil, err
		}
	}
	rep.DatabaseBytes, err = c.databaseBytes()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "sluice bench embedded: %s, sync durability on MinIO; %d embedded replicas (%s processes); database of %d rows, %d KiB\n",
		o.Sluice, o.Replicas, clientName(o.Client), o.Rows, rep.DatabaseBytes>>10)

	// The replicas bootstrap.
	syncURL := srv.URL + "/db/app/"
	workers := make([]*worker, o.Replicas)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.stop()
			}
		}
	}()
	for i := range workers {
		var ms float64
		workers[i], ms, err = startWorker(ctx, o.Client, o.WorkDir, o.NodeModules, o.Python, filepath.Join(o.WorkDir, fmt.Sprintf("replica-%d.db", i)), syncURL, roToken)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "  replica %d bootstrapped in %.0f ms\n", i, ms)
	}

	// A writer inserts through the server for the rest of the run's
	// first half: reads, Hrana reads and the lag are measured under it.
	wr := &writer{c: c, next: int64(o.Rows) + 1, every: o.WriteEvery}
	wctx, stopWriter := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() { wdone <- wr.run(wctx) }()
	writerStopped := false
	stopW := func() error {
		if writerStopped {
			return nil
		}
		writerStopped = true
		stopWriter()
		return <-wdone
	}
	defer func() { _ = stopW() }()

	if err := measureReads(o, workers, rep, out); err != nil {
		return nil, err
	}
	if err := measureLag(ctx, o, c, srv.Pid(), workers, wr, rep, out); err != nil {
		return nil, err
	}
	if err := stopW(); err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	rep.WritesAcked = wr.acked()
	if err := measureEmptySyncs(o, c, srv.Pid(), workers, rep, out); err != nil {
		return nil, err
	}
	// The bucket, read as sluice reads it (MinIO's credentials).
	for _, kv := range mio.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	store, err := replicaurl.Open(ctx, srv.Replica)
	if err != nil {
		return nil, err
	}
	if err := measureCommitsSync(ctx, o, c, store, workers[0], rep, out); err != nil {
		return nil, err
	}
	// Every acknowledged write is on every replica.
	for i, w := range workers {
		var s syncAnswer
		if err := w.call(map[string]any{"op": "sync", "n": 1}, &s); err != nil {
			return nil, err
		}
		if want := int64(o.Rows) + int64(rep.WritesAcked) + int64(o.Commits); s.MaxID != want {
			return nil, fmt.Errorf("replica %d: newest row %d after the final sync; %d rows were acknowledged", i, s.MaxID, want)
		}
	}
	fmt.Fprintf(out, "every replica holds all %d acknowledged rows\n", int64(o.Rows)+int64(rep.WritesAcked)+int64(o.Commits))
	judge(rep, out)
	return rep, nil
}

type syncAnswer struct {
	SyncMs []float64 `json:"syncMs"`
	MaxID  int64     `json:"maxId"`
}

// measureReads runs the point reads on every replica at once, locally,
// then over Hrana from the same processes.
func measureReads(o Options, workers []*worker, rep *Report, out io.Writer) error {
	type reads struct {
		Lat []float64 `json:"lat"`
		Ms  float64   `json:"ms"`
	}
	run := func(where string, n int) ([]reads, error) {
		res := make([]reads, len(workers))
		errs := make([]error, len(workers))
		var wg sync.WaitGroup
		for i, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = w.call(map[string]any{"op": "reads", "where": where, "n": n, "maxId": o.Rows}, &res[i])
			}()
		}
		wg.Wait()
		return res, errors.Join(errs...)
	}
	// One client alone first (the others idle): its own read rates,
	// locally and over Hrana, with the machine's cores not shared among
	// the bench's own processes.
	alone := workers[:1]
	one := func(where string, n int) (reads, error) {
		var r reads
		return r, alone[0].call(map[string]any{"op": "reads", "where": where, "n": n, "maxId": o.Rows}, &r)
	}
	l1, err := one("local", o.Reads)
	if err != nil {
		return err
	}
	h1, err := one("remote", o.HranaReads)
	if err != nil {
		return err
	}
	rep.AloneLocalPerSec = float64(len(l1.Lat)) / (l1.Ms / 1000)
	rep.AloneHranaPerSec = float64(len(h1.Lat)) / (h1.Ms / 1000)
	rep.AloneRatio = rep.AloneLocalPerSec / rep.AloneHranaPerSec
	fmt.Fprintf(out, "point reads by one client alone, a writer inserting every %s (%d CPUs):\n", o.WriteEvery, runtime.NumCPU())
	fmt.Fprintf(out, "  local (embedded replica): p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s\n", pct(l1.Lat, 50), pct(l1.Lat, 99), rep.AloneLocalPerSec)
	fmt.Fprintf(out, "  Hrana (same client):      p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s\n", pct(h1.Lat, 50), pct(h1.Lat, 99), rep.AloneHranaPerSec)
	fmt.Fprintf(out, "  local/Hrana read rate: %.0f×\n", rep.AloneRatio)

	local, err := run("local", o.Reads)
	if err != nil {
		return err
	}
	remote, err := run("remote", o.HranaReads)
	if err != nil {
		return err
	}
	var all [2][]float64
	rate := [2]float64{}
	rep.ReadRatio = 0
	for i := range workers {
		all[0] = append(all[0], local[i].Lat...)
		all[1] = append(all[1], remote[i].Lat...)
		l, h := float64(len(local[i].Lat))/(local[i].Ms/1000), float64(len(remote[i].Lat))/(remote[i].Ms/1000)
		rate[0] += l
		rate[1] += h
		if r := l / h; rep.ReadRatio == 0 || r < rep.ReadRatio {
			rep.ReadRatio = r
		}
	}
	rep.LocalP50us, rep.LocalP99us = pct(all[0], 50), pct(all[0], 99)
	rep.HranaP50us, rep.HranaP99us = pct(all[1], 50), pct(all[1], 99)
	rep.LocalPerSec, rep.HranaPerSec = rate[0], rate[1]
	fmt.Fprintf(out, "point reads, %d replicas at once, a writer inserting every %s:\n", len(workers), o.WriteEvery)
	fmt.Fprintf(out, "  local (embedded replica): p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s in all\n", rep.LocalP50us, rep.LocalP99us, rep.LocalPerSec)
	fmt.Fprintf(out, "  Hrana (same clients):     p50 %8.1f µs  p99 %8.1f µs  %9.0f reads/s in all\n", rep.HranaP50us, rep.HranaP99us, rep.HranaPerSec)
	fmt.Fprintf(out, "  local/Hrana read rate, per client (lowest): %.0f× (the %d clients' local reads share the machine's %d CPUs)\n", rep.ReadRatio, len(workers), runtime.NumCPU())
	return nil
}

// measureLag has every replica sync in a loop while the writer inserts,
// and matches each acknowledged write to the first sync that showed it.
func measureLag(ctx context.Context, o Options, c *client, pid int, workers []*worker, wr *writer, rep *Report, out io.Writer) error {
	type follow struct {
		Points [][2]float64 `json:"points"`
		SyncMs []float64    `json:"syncMs"`
	}
	before, err := c.metrics()
	if err != nil {
		return err
	}
	cpu0, _ := targets.CPUTime(pid)
	res := make([]follow, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	from := time.Now()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.call(map[string]any{"op": "follow", "ms": o.Follow.Milliseconds(), "intervalMs": 0}, &res[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cpu1, _ := targets.CPUTime(pid)
	after, err := c.metrics()
	if err != nil {
		return err
	}
	acks := wr.since(from)
	var lags []float64
	for _, f := range res {
		rep.FollowSyncs += len(f.Points)
		j := 0
		for _, a := range acks { // acks and points both in time order
			for j < len(f.Points) && (f.Points[j][0] < a.at || int64(f.Points[j][1]) < a.id) {
				j++
			}
			if j == len(f.Points) {
				break // acknowledged after this replica's last sync
			}
			lags = append(lags, f.Points[j][0]-a.at)
		}
	}
	rep.LagP50ms, rep.LagP99ms = pct(lags, 50), pct(lags, 99)
	syncs := after.syncRequests() - before.syncRequests()
	if syncs > 0 {
		rep.FollowBytesPerSync = (after.get(metricSyncBytes) - before.get(metricSyncBytes)) / syncs
		rep.FollowServerUsPerSync = 1e6 * (after.get(metricSyncSum) - before.get(metricSyncSum)) / syncs
		rep.FollowServerCPUusPerReq = float64((cpu1 - cpu0).Microseconds()) / syncs
	}
	fmt.Fprintf(out, "sync() in a loop on every replica for %s while the writer inserts (%d writes acknowledged meanwhile):\n", o.Follow, len(acks))
	fmt.Fprintf(out, "  lag from a write's acknowledgement to its visibility after sync(): p50 %.1f ms  p99 %.1f ms (%d write×replica pairs)\n", rep.LagP50ms, rep.LagP99ms, len(lags))
	fmt.Fprintf(out, "  %d syncs (%.0f sync requests): %.0f bytes per request, database %d KiB; server time %.0f µs per request; server CPU %.0f µs per request (writes included)\n",
		rep.FollowSyncs, syncs, rep.FollowBytesPerSync, rep.DatabaseBytes>>10, rep.FollowServerUsPerSync, rep.FollowServerCPUusPerReq)
	return nil
}

// measureEmptySyncs has every replica sync with nothing new.
func measureEmptySyncs(o Options, c *client, pid int, workers []*worker, rep *Report, out io.Writer) error {
	for _, w := range workers { // catch up first: what follows is empty
		var s syncAnswer
		if err := w.call(map[string]any{"op": "sync", "n": 1}, &s); err != nil {
			return err
		}
	}
	before, err := c.metrics()
	if err != nil {
		return err
	}
	cpu0, _ := targets.CPUTime(pid)
	res := make([]syncAnswer, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.call(map[string]any{"op": "sync", "n": o.EmptySyncs}, &res[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	cpu1, _ := targets.CPUTime(pid)
	after, err := c.metrics()
	if err != nil {
		return err
	}
	var client []float64
	for _, r := range res {
		client = append(client, r.SyncMs...)
	}
	syncs := after.syncRequests() - before.syncRequests()
	rep.EmptySyncs = len(client)
	if syncs > 0 {
		rep.EmptySyncServerUs = 1e6 * (after.get(metricSyncSum) - before.get(metricSyncSum)) / syncs
		rep.EmptySyncCPUus = float64((cpu1 - cpu0).Microseconds()) / syncs
	}
	rep.EmptySyncClientP50ms = pct(client, 50)
	rep.EmptySyncStoreRequests = after.get(metricStorePuts) - before.get(metricStorePuts)
	moved := after.get(metricSyncBytes) - before.get(metricSyncBytes)
	fmt.Fprintf(out, "%d syncs with nothing new (%d per replica, at once): %.0f sync requests (%.2f per sync()), %.0f bytes of pages moved, %.0f store PUTs\n",
		len(client), o.EmptySyncs, syncs, syncs/float64(len(client)), moved, rep.EmptySyncStoreRequests)
	fmt.Fprintf(out, "  server time %.0f µs per request, server CPU %.0f µs per request; client sync() p50 %.2f ms\n",
		rep.EmptySyncServerUs, rep.EmptySyncCPUus, rep.EmptySyncClientP50ms)
	return nil
}

// measureCommitsSync makes Commits single-row commits, then one replica
// syncs once; what it moved is compared with the pages those commits
// changed, read from their level-0 files in the bucket.
func measureCommitsSync(ctx context.Context, o Options, c *client, store replica.Store, w *worker, rep *Report, out io.Writer) error {
	next, err := c.maxID()
	if err != nil {
		return err
	}
	wr := &writer{c: c, next: next + 1}
	// Each commit's level-0 file is read as soon as it is acknowledged
	// (compaction may merge it away later).
	pages := map[uint32]bool{}
	var from, to uint64
	for i := range o.Commits {
		if err := wr.insert(); err != nil {
			return err
		}
		txid, err := c.headTXID()
		if err != nil {
			return err
		}
		if i == 0 {
			from = txid
		}
		to = txid
		if err := filePages(ctx, store, txid, pages); err != nil {
			return err
		}
	}
	before, err := c.metrics()
	if err != nil {
		return err
	}
	var s syncAnswer
	if err := w.call(map[string]any{"op": "sync", "n": 1}, &s); err != nil {
		return err
	}
	after, err := c.metrics()
	if err != nil {
		return err
	}
	rep.CommitsSyncBytes = int64(after.get(metricSyncBytes) - before.get(metricSyncBytes))
	rep.CommitsChangedPages = len(pages)
	rep.CommitsSyncBytesPerPage = float64(rep.CommitsSyncBytes) / float64(len(pages)*4096)
	var kinds []string
	for _, k := range []string{"diff", "end", "database", "export"} {
		if n := after.get(metricAnswers+k+`"}`) - before.get(metricAnswers+k+`"}`); n > 0 {
			kinds = append(kinds, fmt.Sprintf("%.0f %s", n, k))
		}
	}
	rep.CommitsSyncAnswers = strings.Join(kinds, ", ")
	fmt.Fprintf(out, "one sync() after %d single-row commits (TXIDs %d-%d): %d bytes moved (%s) for %d changed pages (%d bytes): %.2f× the changed pages\n",
		o.Commits, from, to, rep.CommitsSyncBytes, rep.CommitsSyncAnswers, len(pages), len(pages)*4096, rep.CommitsSyncBytesPerPage)
	return nil
}

// filePages adds the pages TXID txid's level-0 file changed, read through
// sluice's own store (its key layout in the bucket).
func filePages(ctx context.Context, store replica.Store, txid uint64, pages map[uint32]bool) error {
	key := replica.LTXKey(0, ltx.TXID(txid), ltx.TXID(txid))
	rc, err := replica.Sub(store, "app").Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read app/%s: %w", key, err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	dec := ltx.NewDecoder(bytes.NewReader(body))
	if err := dec.DecodeHeader(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	buf := make([]byte, dec.Header().PageSize)
	for {
		var ph ltx.PageHeader
		if err := dec.DecodePage(&ph, buf); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		pages[ph.Pgno] = true
	}
}

func judge(rep *Report, out io.Writer) {
	check := func(ok bool, format string, args ...any) {
		v := "ok  "
		if !ok {
			v = "MISS"
			rep.Missed++
		}
		line := v + " " + fmt.Sprintf(format, args...)
		rep.Verdicts = append(rep.Verdicts, line)
		fmt.Fprintln(out, line)
	}
	check(rep.AloneRatio >= TargetReadRatio, "a client's local reads %.0f× its Hrana read rate, alone (target ≥ %d×; all %d at once: %.0f×)", rep.AloneRatio, TargetReadRatio, rep.Replicas, rep.ReadRatio)
	check(rep.EmptySyncServerUs <= float64(TargetEmptySync.Microseconds()), "an empty sync takes %.0f µs of server time (target ≤ %s)", rep.EmptySyncServerUs, TargetEmptySync)
	check(rep.CommitsSyncBytesPerPage <= TargetSyncOverPgs, "a sync after the commits moves %.2f× the changed pages' bytes (target ≤ %.0f×)", rep.CommitsSyncBytesPerPage, TargetSyncOverPgs)
}

// pct is the p-th percentile of v (sorted in place).
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	i := int(float64(len(v)-1) * p / 100)
	return v[i]
}

// client talks to the server's JSON API and /metrics.
type client struct {
	base string
	http *http.Client
}

func (c *client) do(method, path, body string) error {
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return nil
}

func (c *client) query(sql string, args ...any) ([][]any, error) {
	body, _ := json.Marshal(map[string]any{"sql": sql, "params": args})
	req, _ := http.NewRequest("POST", c.base+"/v1/databases/app/query", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%.80s: %d %s", sql, resp.StatusCode, raw)
	}
	var r struct {
		Results []struct {
			Rows [][]any `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Results) != 1 {
		return nil, fmt.Errorf("%.80s: %v %s", sql, err, raw)
	}
	return r.Results[0].Rows, nil
}

func (c *client) one(sql string) (int64, error) {
	rows, err := c.query(sql)
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return 0, fmt.Errorf("%s: %v", sql, rows)
	}
	n, _ := rows[0][0].(float64)
	return int64(n), nil
}

func (c *client) databaseBytes() (int64, error) {
	return c.one("SELECT page_count * page_size FROM pragma_page_count, pragma_page_size")
}

func (c *client) maxID() (int64, error) { return c.one("SELECT max(id) FROM t") }

func (c *client) headTXID() (uint64, error) {
	req, _ := http.NewRequest("GET", c.base+"/v1/databases/app", nil)
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var d struct {
		TXID uint64 `json:"txid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return 0, err
	}
	return d.TXID, nil
}

const (
	syncRoute       = `route="GET /db/{name}/sync/{generation}/{start}/{end}",db="app"}`
	metricSyncSum   = `sluice_http_request_duration_seconds_sum{` + syncRoute
	metricSyncCount = `sluice_http_request_duration_seconds_count{` + syncRoute
	metricSyncBytes = `sluice_embedded_sync_bytes_total{db="app"}`
	metricAnswers   = `sluice_embedded_sync_answers_total{db="app",answer="`
	metricStorePuts = `sluice_store_put_requests`
)

type scrape map[string]float64

func (s scrape) get(series string) float64 { return s[series] }

func (s scrape) syncRequests() float64 { return s[metricSyncCount] }

func (c *client) metrics() (scrape, error) {
	req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+rwToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	s := scrape{}
	for _, line := range strings.Split(string(raw), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
			s[line[:i]] = v
		}
	}
	return s, nil
}

// writer inserts one row per commit through the JSON API, recording when
// each was acknowledged.
type writer struct {
	c     *client
	next  int64
	every time.Duration
	mu    sync.Mutex
	acks  []ack
}

type ack struct {
	id int64
	at float64 // wall clock, ms (as the replicas' worker reports)
}

func (w *writer) insert() error {
	id := w.next
	if _, err := w.c.query("INSERT INTO t(id, v) VALUES (?, ?)", id, fmt.Sprintf("written-%d", id)); err != nil {
		return err
	}
	w.next++
	w.mu.Lock()
	w.acks = append(w.acks, ack{id: id, at: float64(time.Now().UnixNano()) / 1e6})
	w.mu.Unlock()
	return nil
}

func (w *writer) run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := w.insert(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

func (w *writer) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

func (w *writer) since(t time.Time) []ack {
	ms := float64(t.UnixNano()) / 1e6
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ack
	for _, a := range w.acks {
		if a.at >= ms {
			out = append(out, a)
		}
	}
	return out
}

// DefaultNodeModules is where make deps installs @libsql/client.
func DefaultNodeModules() string {
	if d := os.Getenv("SLUICE_TOOLS"); d != "" {
		return filepath.Join(d, "node_modules")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sluice-tools", "node_modules")
}

func clientName(c string) string {
	if c == "python" {
		return "PyPI libsql"
	}
	return "@libsql/client"
}
