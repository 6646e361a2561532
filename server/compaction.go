package server

import (
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/metrics"
)

// compaction is serve's compaction and retention: one compact.Compactor per
// open database (made by package replicated and notified of every shipped
// file, so its steady state makes no LIST), and one compact.Scheduler that
// runs their passes on a few workers, the largest and longest-waiting
// backlog first. Databases do not compact on timers of their own: a hundred
// of them would all merge at each level-1 boundary at once.
//
// Closing an idle database releases its compactor without waiting: the
// scheduler folds its level-0 files into level 1 when a worker is free, and
// forgets it. A database deleted, or closed with a lease that another
// instance may take next, is forgotten at once instead (its pass in flight
// cancelled): nothing may write a replica this process no longer owns. Shutdown stops the scheduler first, cancelling passes in
// flight: it leaves level 0 for the next start instead of merging on the
// way out (the final uploads alone decide how long SIGTERM takes).
type compaction struct {
	sched  *compact.Scheduler // nil when disabled
	cfg    compact.Config
	passes *metrics.Histogram // set by register, before the first database opens
}

func newCompaction(cfg Compaction) *compaction {
	if cfg.Disabled {
		return &compaction{}
	}
	c := &compaction{
		cfg: compact.Config{SnapshotInterval: time.Duration(cfg.SnapshotInterval), Retention: time.Duration(cfg.Retention),
			Deleter: compact.DefaultDeleter}, // many databases: no worker waits for a DELETE
	}
	c.sched = compact.NewScheduler(cfg.Workers, c.observe)
	return c
}

// observe records one pass's duration (a nil histogram records nothing).
func (c *compaction) observe(took time.Duration, err error) {
	if c.passes == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.passes.Observe(took.Seconds(), result)
}

// perDatabase is how dbhost compacts each open database: a compactor of
// its own, run by the shared scheduler (nil when disabled).
func (c *compaction) perDatabase() *replicated.Compaction {
	if c.sched == nil {
		return nil
	}
	return &replicated.Compaction{Config: c.cfg, Scheduler: c.sched}
}

// stop cancels the passes in flight and runs nothing more.
func (c *compaction) stop() {
	if c.sched != nil {
		c.sched.Stop()
	}
}

// register exports the scheduler's queue.
func (c *compaction) register(reg *metrics.Registry) {
	if c.sched == nil {
		return
	}
	c.passes = reg.NewHistogram("sluice_compaction_pass_seconds", "Compaction passes (and flushes of closed databases) by how long they took.",
		[]float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}, "result")
	gauge := func(f func(compact.SchedulerStats) float64) func() []metrics.Sample {
		return func() []metrics.Sample { return []metrics.Sample{{Value: f(c.sched.Stats())}} }
	}
	reg.GaugeFunc("sluice_compaction_backlog_files", "Level-0 files waiting for level 1, over every database with a compactor.", nil,
		gauge(func(s compact.SchedulerStats) float64 { return float64(s.Backlog) }))
	reg.GaugeFunc("sluice_compaction_waiting", "Databases with compaction due that wait for a worker.", nil,
		gauge(func(s compact.SchedulerStats) float64 { return float64(s.Waiting) }))
	reg.GaugeFunc("sluice_compaction_running", "Compaction passes in flight.", nil,
		gauge(func(s compact.SchedulerStats) float64 { return float64(s.Running) }))
}
