package compact

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Scheduler runs the passes of many compactors (one per database of a
// server) on a fixed pool of workers, instead of one timer and one goroutine
// per database. Left to their own clocks, a hundred compactors all wake at
// the same level-1 boundary and merge at once: every pass then finishes only
// when all of them do, the backlog of each waits for the slowest, and memory
// holds a hundred merges in progress. The scheduler gives each free worker
// the waiting compactor with the highest score,
//
//	(level-0 backlog + 1) × 2^(time waited / level-1 interval)
//
// so a large backlog goes first, and anything that waits doubles its
// priority every level-1 interval until it runs: no compactor starves (one
// with a single file waiting overtakes a fresh backlog of 256 within eight
// intervals). A compactor waits when the clock has
// crossed one of its boundaries since its last pass, when more than
// L0Trigger level-0 files wait for level 1, or when its database closed
// (then it gets one Flush, and is forgotten).
//
// Every pass has a deadline (PassTimeout): one stuck on a slow store gives
// its worker back and is retried with backoff. Stop cancels the passes in
// flight and runs nothing more: a shutdown leaves level 0 for the next start
// rather than compacting on the way out.
type Scheduler struct {
	workers     int
	tick        time.Duration
	passTimeout time.Duration
	onPass      func(time.Duration, error)
	ctx         context.Context
	cancel      context.CancelFunc
	wake        chan struct{}
	wg          sync.WaitGroup

	mu      sync.Mutex
	jobs    map[string]*job
	stopped bool
	passes  int64 // passes and flushes run, for Stats
}

// job is one registered compactor.
type job struct {
	key     string
	c       *Compactor
	added   time.Time
	running bool
	ctx     context.Context    // of the pass in flight
	cancel  context.CancelFunc // of the pass in flight
	done    chan struct{}      // closed when the pass in flight returns
	closing time.Time          // non-zero: released; flush level 0, then forget
	flushes int                // failed flush attempts
	retryAt time.Time          // after a failure: not before this
	backoff time.Duration
}

// DefaultWorkers is the number of passes a Scheduler runs at once unless
// told otherwise. Merges spend most of their time waiting for the store, and
// their store requests are bounded by the budget anyway; a few workers keep
// the budget busy without holding many merges in memory.
const DefaultWorkers = 4

// PassTimeout bounds one pass or flush. A pass is at most maxInputs inputs
// per level, merged in rounds of FanIn: minutes only on a store that barely
// answers, and then the worker is better spent on the other databases.
const PassTimeout = 5 * time.Minute

// maxFlushAttempts bounds the retries of a released compactor's flush: its
// database is closed, and a store that keeps failing must not keep it in
// memory forever (its level-0 files stay restorable; the next open compacts
// them).
const maxFlushAttempts = 3

// NewScheduler starts a scheduler with workers passes at once (<= 0:
// DefaultWorkers). Each compactor logs its own failures; onPass (if not
// nil) is told how long every pass or flush took, for metrics.
func NewScheduler(workers int, onPass func(took time.Duration, err error)) *Scheduler {
	s := newScheduler(workers)
	s.onPass = onPass
	s.start()
	return s
}

func newScheduler(workers int) *Scheduler {
	if workers <= 0 {
		workers = DefaultWorkers
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{workers: workers, tick: time.Second, passTimeout: PassTimeout, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), jobs: map[string]*job{}}
}

func (s *Scheduler) start() {
	s.wg.Add(s.workers)
	for range s.workers {
		go s.work()
	}
}

// Add registers c under key (a database's name) and returns the function
// that releases it when the database closes. release(true) never waits: a
// compactor with level-0 files waiting gets one Flush when a worker is free,
// then is forgotten. release(false) cancels a pass in flight and returns once
// nothing of c writes any more: for a replica about to be purged, or handed
// to another process with its lease. Adding a key that is still
// registered (a database reopened before its flush ran) cancels and
// replaces the old compactor: the new one lists the store afresh.
func (s *Scheduler) Add(key string, c *Compactor) (release func(flush bool)) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return func(bool) {}
	}
	j := &job{key: key, c: c, added: time.Now()}
	if old := s.jobs[key]; old != nil && old.running {
		// Two compactors of one replica must not work at once: the new one
		// is registered only once the old one's pass has ended.
		delete(s.jobs, key)
		old.cancel()
		ended := old.done
		s.mu.Unlock()
		<-ended
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return func(bool) {}
		}
	}
	s.jobs[key] = j
	s.mu.Unlock()
	s.poke()
	return func(flush bool) {
		if flush {
			s.release(j)
		} else {
			s.drop(j)
		}
	}
}

func (s *Scheduler) release(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobs[j.key] != j || !j.closing.IsZero() {
		return
	}
	j.closing = time.Now()
	if n, _ := j.c.Backlog(); n < 2 && !j.running {
		delete(s.jobs, j.key) // nothing to merge: one file or none
		return
	}
	j.retryAt, j.backoff = time.Time{}, 0
	s.poke()
}

// drop forgets j at once, cancelling its pass in flight and waiting for it.
func (s *Scheduler) drop(j *job) {
	s.mu.Lock()
	var wait chan struct{}
	if s.jobs[j.key] == j {
		delete(s.jobs, j.key)
	}
	if j.running {
		j.cancel()
		wait = j.done
	}
	s.mu.Unlock()
	if wait != nil {
		<-wait
	}
}

// Stop cancels the passes in flight, waits for the workers to return and
// runs nothing more. Later Adds register nothing.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.jobs = map[string]*job{}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// SchedulerStats describes the scheduler's queue.
type SchedulerStats struct {
	Compactors int   // registered, open databases and released ones not yet flushed
	Running    int   // passes in flight
	Waiting    int   // compactors with work due, not running
	Backlog    int   // level-0 files waiting for level 1, over all compactors
	Passes     int64 // passes and flushes run since the start
}

// Stats reports the queue at this moment.
func (s *Scheduler) Stats() SchedulerStats {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SchedulerStats{Compactors: len(s.jobs), Passes: s.passes}
	for _, j := range s.jobs {
		n, _ := j.c.Backlog()
		st.Backlog += n
		switch {
		case j.running:
			st.Running++
		case s.readySince(j, now) != nil:
			st.Waiting++
		}
	}
	return st
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) work() {
	defer s.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		if j, flush := s.take(time.Now()); j != nil {
			s.run(j, flush)
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
	}
}

// readySince reports since when j has work due (nil: none now). Callers
// hold mu.
func (s *Scheduler) readySince(j *job, now time.Time) *time.Time {
	if now.Before(j.retryAt) {
		return nil
	}
	if !j.closing.IsZero() {
		return &j.closing
	}
	due := j.c.NextDue()
	if due.IsZero() { // never ran: the first pass lists the store
		return &j.added
	}
	if n, since := j.c.Backlog(); n > j.c.cfg.L0Trigger {
		return &since
	}
	if !now.Before(due) {
		return &due
	}
	return nil
}

// priority is a waiting compactor's score: its backlog, doubled for every
// interval it has waited.
func priority(backlog int, waited, interval time.Duration) float64 {
	doublings := min(max(waited.Seconds(), 0)/interval.Seconds(), 60)
	return float64(backlog+1) * math.Exp2(doublings)
}

// take picks the waiting job with the highest score and marks it running.
func (s *Scheduler) take(now time.Time) (*job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, false
	}
	var best *job
	bestScore := -1.0
	for _, j := range s.jobs {
		if j.running {
			continue
		}
		since := s.readySince(j, now)
		if since == nil {
			continue
		}
		n, _ := j.c.Backlog()
		score := priority(n, now.Sub(*since), j.c.cfg.Levels[0].Interval)
		if score > bestScore {
			best, bestScore = j, score
		}
	}
	if best == nil {
		return nil, false
	}
	best.ctx, best.cancel = context.WithTimeout(s.ctx, s.passTimeout)
	best.running, best.done = true, make(chan struct{})
	return best, !best.closing.IsZero()
}

// run runs j's pass (or its flush) and reschedules it: a failure backs off
// (2 s doubling to 5 min, as Compactor.Run does); a flushed or empty
// released compactor is forgotten.
func (s *Scheduler) run(j *job, flush bool) {
	now := time.Now()
	var err error
	if flush {
		err = j.c.Flush(j.ctx, now, 0)
	} else {
		err = j.c.CompactOnce(j.ctx, now)
	}
	if s.onPass != nil {
		s.onPass(time.Since(now), err)
	}
	cancelled := s.ctx.Err() != nil
	if err != nil && errors.Is(j.ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w (pass took longer than %s)", err, s.passTimeout)
	}
	j.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	j.running = false
	close(j.done)
	s.passes++
	if s.jobs[j.key] != j || cancelled {
		return // stopped, or replaced by a reopened database's compactor
	}
	if err != nil {
		j.backoff = min(max(2*j.backoff, 2*time.Second), maxBackoff)
		j.retryAt = now.Add(j.backoff)
		if flush {
			if j.flushes++; j.flushes >= maxFlushAttempts {
				delete(s.jobs, j.key)
				j.c.log.Warn("could not compact a closed database's level-0 files; they stay restorable and its next open compacts them", "err", err)
				return
			}
		}
		j.c.log.Warn("compaction pass failed; will retry", "in", j.backoff.String(), "err", err)
		return
	}
	j.backoff, j.retryAt = 0, time.Time{}
	if flush {
		delete(s.jobs, j.key)
	} else if !j.closing.IsZero() {
		if n, _ := j.c.Backlog(); n < 2 {
			delete(s.jobs, j.key)
		}
	}
}
