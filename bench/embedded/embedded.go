package embedded

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/netdelay"
	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/internal/minioproc"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

// Options configure a run. Zero values get the defaults in brackets.
type Options struct {
	Sluice      string // the sluice binary
	WorkDir     string
	Client      string // "node" (@libsql/client) or "python" (PyPI libsql) [node]
	NodeModules string // where @libsql/client is installed
	Python      string // the python3 that has libsql [python3]
	Tools       string // where the rust client is built [DefaultTools()]
	// ClientRTT, if positive, adds a round trip of this length between the
	// applications and the server for a third set of Hrana reads (through a
	// TCP proxy that delays each direction by half of it), as a network
	// between two hosts would.
	ClientRTT  time.Duration
	Replicas   int // embedded replicas, one process each [4]
	Rows       int // rows in the database before the run [20000]
	RowBytes   int // bytes of each row's value [100]
	Reads      int // local point reads per replica [20000]
	HranaReads int // the same reads over Hrana per replica [1000]
	// Follow is how long the replicas sync in a loop while the writer
	// inserts (the lag) [10s]; WriteEvery paces the writer [20ms].
	Follow     time.Duration
	WriteEvery time.Duration
	// SyncWait, if positive, measures the lag a second time through the
	// sync URL that waits for the next transaction (.../wait/SyncWait/).
	SyncWait   time.Duration
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
	if o.Tools == "" {
		o.Tools = DefaultTools()
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
	ClientRTT      time.Duration // the round trip added for the far Hrana reads (0: none)
	DatabaseBytes  int64

	LocalP50us, LocalP99us, LocalPerSec float64
	HranaP50us, HranaP99us, HranaPerSec float64
	ReadRatio                           float64 // local per second / Hrana per second, per client (the lowest), all at once
	AloneLocalPerSec, AloneHranaPerSec  float64 // one client alone
	AloneLocalP50us, AloneHranaP50us    float64
	AloneRatio                          float64
	FarPerSec, FarP50us, FarRatio       float64 // the same client alone over Hrana across ClientRTT
	HranaRequestsPerRead                float64 // Hrana requests the client sent per remote read

	WritesAcked             int
	LagP50ms, LagP99ms      float64
	Lag                     lagFigures  // the same, in full
	WaitLag                 *lagFigures // through the waiting URL (-sync-wait)
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
	rep := &Report{Client: o.Client, Replicas: o.Replicas, Rows: o.Rows, ClientRTT: o.ClientRTT}
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
	urls := workerURLs{sync: srv.URL + "/db/app/", wait: fmt.Sprintf("%s/db/app/wait/%s/", srv.URL, o.SyncWait)}
	var far *netdelay.Proxy
	if o.ClientRTT > 0 {
		if far, err = netdelay.Start(strings.TrimPrefix(srv.URL, "http://"), o.ClientRTT); err != nil {
			return nil, err
		}
		defer far.Close()
		urls.far = "http://" + far.Addr + "/db/app/"
	}
	program := ""
	if o.Client == "rust" {
		if program, err = BuildRustWorker(ctx, o.Tools, out); err != nil {
			return nil, err
		}
	}
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
		workers[i], ms, err = startWorker(ctx, o, program, filepath.Join(o.WorkDir, fmt.Sprintf("replica-%d.db", i)), roToken, urls)
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

	if err := measureReads(o, c, far, workers, rep, out); err != nil {
		return nil, err
	}
	lf, err := measureLag(o, c, srv.Pid(), workers, wr, false)
	if err != nil {
		return nil, err
	}
	printLag(out, o, lf, false, rep.DatabaseBytes)
	rep.LagP50ms, rep.LagP99ms, rep.FollowSyncs = lf.P50ms, lf.P99ms, lf.Syncs
	rep.FollowBytesPerSync, rep.FollowServerUsPerSync, rep.FollowServerCPUusPerReq = lf.BytesPerReq, lf.ServerUsPerReq, lf.CPUusPerReq
	rep.Lag = lf
	if o.SyncWait > 0 {
		lw, err := measureLag(o, c, srv.Pid(), workers, wr, true)
		if err != nil {
			return nil, err
		}
		printLag(out, o, lw, true, rep.DatabaseBytes)
		rep.WaitLag = &lw
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
	if rep.ClientRTT > 0 {
		check(rep.FarRatio >= TargetReadRatio, "a client's local reads %.0f× its Hrana read rate across a %s round trip, alone (target ≥ %d×; on loopback %.0f×, all %d at once %.0f×)",
			rep.FarRatio, rep.ClientRTT, TargetReadRatio, rep.AloneRatio, rep.Replicas, rep.ReadRatio)
	} else {
		check(rep.AloneRatio >= TargetReadRatio, "a client's local reads %.0f× its Hrana read rate on loopback, alone (target ≥ %d×; all %d at once: %.0f×)", rep.AloneRatio, TargetReadRatio, rep.Replicas, rep.ReadRatio)
	}
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

// DefaultTools is the directory make deps installs the tests' tools in.
func DefaultTools() string {
	if d := os.Getenv("SLUICE_TOOLS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sluice-tools")
}

// DefaultNodeModules is where make deps installs @libsql/client.
func DefaultNodeModules() string { return filepath.Join(DefaultTools(), "node_modules") }

func clientName(c string) string {
	switch c {
	case "python":
		return "PyPI libsql"
	case "rust":
		return "libsql crate"
	}
	return "@libsql/client"
}
