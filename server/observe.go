package server

import (
	"strconv"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/watch"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/metrics"
)

// serverMetrics are the series sluice serve exports on /metrics; it is also
// the host's write-path observer.
type serverMetrics struct {
	reg         *metrics.Registry
	requests    *metrics.Counter
	latency     *metrics.Histogram
	errors      *metrics.Counter
	groupSize   *metrics.Histogram
	groupTime   *metrics.Histogram
	uploads     *metrics.Histogram
	uploadFails *metrics.Counter
	objects     *metrics.Counter
	bytes       *metrics.Counter
	watch       *watch.Watch // readiness: every upload's outcome counts as a probe
	acked       *metrics.Counter
	cost        *putCost // nil until the server wraps its store
}

var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newServerMetrics(host func() []dbhost.Stats, w *watch.Watch) *serverMetrics {
	r := metrics.New()
	registerMemoryMetrics(r)
	m := &serverMetrics{
		reg:         r,
		watch:       w,
		requests:    r.NewCounter("sluice_http_requests_total", "HTTP requests by route, database and status code.", "route", "db", "code"),
		latency:     r.NewHistogram("sluice_http_request_duration_seconds", "HTTP request latency by route and database.", latencyBuckets, "route", "db"),
		errors:      r.NewCounter("sluice_http_errors_total", "Error responses by route and status code.", "route", "code"),
		groupSize:   r.NewHistogram("sluice_write_group_requests", "Requests per write group (one transaction).", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, "db"),
		groupTime:   r.NewHistogram("sluice_write_group_exec_seconds", "Time to execute and commit one write group.", latencyBuckets, "db"),
		uploads:     r.NewHistogram("sluice_upload_duration_seconds", "Sync (encode + conditional upload) latency.", latencyBuckets, "db"),
		uploadFails: r.NewCounter("sluice_upload_errors_total", "Failed uploads.", "db"),
		objects:     r.NewCounter("sluice_objects_written_total", "LTX objects written to the replica.", "db"),
		bytes:       r.NewCounter("sluice_bytes_written_total", "LTX bytes written to the replica.", "db"),
		acked:       r.NewCounter("sluice_writes_acknowledged_total", "Writes acknowledged (sync: once in the replica; async: once committed)."),
	}
	stat := func(f func(dbhost.Stats) float64) func() []metrics.Sample {
		return func() []metrics.Sample {
			var out []metrics.Sample
			for _, s := range host() {
				out = append(out, metrics.Sample{Labels: []string{s.Name}, Value: f(s)})
			}
			return out
		}
	}
	db := []string{"db"}
	r.GaugeFunc("sluice_replication_txid", "Last TXID accepted by the replica.", db, stat(func(s dbhost.Stats) float64 { return float64(s.TXID) }))
	r.GaugeFunc("sluice_unshipped_commits", "Commits not yet in the replica (the async loss window; in sync mode, groups in flight).", db,
		stat(func(s dbhost.Stats) float64 { return float64(s.Unshipped) }))
	r.GaugeFunc("sluice_unshipped_age_seconds", "Age of the oldest commit not yet in the replica (0 if none).", db, stat(func(s dbhost.Stats) float64 {
		if s.OldestUnshipped.IsZero() {
			return 0
		}
		return time.Since(s.OldestUnshipped).Seconds()
	}))
	r.GaugeFunc("sluice_database_fenced", "1 if another writer owns the database's replica and it takes no writes.", db, stat(func(s dbhost.Stats) float64 {
		if s.Fenced {
			return 1
		}
		return 0
	}))
	r.GaugeFunc("sluice_replica_ready", "1 if the replica accepted an upload or probe within the error budget.", nil, func() []metrics.Sample {
		v := 0.0
		if w.Status().Ready {
			v = 1
		}
		return []metrics.Sample{{Value: v}}
	})
	r.GaugeFunc("sluice_replica_last_success_age_seconds", "Seconds since the replica last accepted an upload or probe (-1 if never).", nil, func() []metrics.Sample {
		st := w.Status()
		if st.LastOK.IsZero() {
			return []metrics.Sample{{Value: -1}}
		}
		return []metrics.Sample{{Value: time.Since(st.LastOK).Seconds()}}
	})
	return m
}

// countPuts wraps the replica so that /metrics reports the PUT requests
// sluice makes, per 1,000 acknowledged writes and as a monthly cost.
func (m *serverMetrics) countPuts(store replica.Store) replica.Store {
	counted := &putCounter{Store: store}
	m.cost = &putCost{store: counted, start: time.Now()}
	one := func(f func() float64) func() []metrics.Sample {
		return func() []metrics.Sample { return []metrics.Sample{{Value: f()}} }
	}
	m.reg.GaugeFunc("sluice_store_put_requests", "PUT requests sent to the replica since the server started (uploads, compaction, leases).", nil,
		one(func() float64 { return float64(counted.puts.Load()) }))
	m.reg.GaugeFunc("sluice_puts_per_1000_writes", "PUT requests per 1,000 acknowledged writes since the server started (0 before the first write).", nil,
		one(m.cost.perThousandWrites))
	m.reg.GaugeFunc("sluice_estimated_monthly_put_cost_usd", "The PUT requests' cost over 30 days at S3's list price ($0.005 per 1,000), at the average rate since the server started.", nil,
		one(func() float64 { return m.cost.monthlyUSD(time.Now()) }))
	return counted
}

// WritesAcknowledged counts acknowledged writes (groupcommit.AckObserver).
func (m *serverMetrics) WritesAcknowledged(db string, n int) {
	m.acked.Add(float64(n))
	if m.cost != nil {
		m.cost.acked.Add(int64(n))
	}
}

func (m *serverMetrics) request(route, db string, code int, d time.Duration) {
	c := strconv.Itoa(code)
	m.requests.Inc(route, db, c)
	m.latency.Observe(d.Seconds(), route, db)
	if code >= 400 {
		m.errors.Inc(route, c)
	}
}

func (m *serverMetrics) GroupCommitted(db string, requests int, d time.Duration) {
	m.groupSize.Observe(float64(requests), db)
	m.groupTime.Observe(d.Seconds(), db)
}

func (m *serverMetrics) Synced(db string, d time.Duration, err error) {
	m.uploads.Observe(d.Seconds(), db)
	m.watch.Observe(err)
	if err != nil {
		m.uploadFails.Inc(db)
	}
}

func (m *serverMetrics) Shipped(db string, f replica.LTXFile) {
	m.objects.Inc(db)
	m.bytes.Add(float64(f.Size), db)
}
