// Package watch tracks whether a replica currently takes writes, for
// readiness (/ready) and metrics. Uploads report their outcome to it; while
// none happen it checks the store itself, cheaply: one HEAD request every
// quarter of the error budget while healthy, and a listing plus a small
// write every second while not, so an idle process still learns that
// its store went away and when it came back. A request outstanding past the
// stall threshold makes the store not ready before it fails (stall.go).
//
// It imports only replica.
package watch

import (
	"context"
	"sync"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// DefaultBudget is how long a replica may go without accepting anything
// before the process is not ready.
const DefaultBudget = 60 * time.Second

// maxUnhealthyProbe bounds the probe interval while not ready: a store
// that answers again is seen within about a second.
const maxUnhealthyProbe = time.Second

// probeTimeout bounds one probe: long enough for a slow store, and a probe
// outstanding past the stall threshold marks the store stalled before it.
const probeTimeout = 5 * time.Second

// Watch is one store's readiness.
type Watch struct {
	store    replica.Store
	budget   time.Duration
	readOnly bool

	mu      sync.Mutex
	lastOK  time.Time
	lastErr error
	errors  int64

	// Stalls (stall.go): requests outstanding by id, the configured
	// threshold (0: derived) and the latencies it is derived from.
	stallFixed  time.Duration
	nextID      uint64
	outstanding map[uint64]time.Time
	latencies   [latencySamples]time.Duration
	nLat        int
	derived     time.Duration // the threshold derived from latencies; 0: stale
}

// New watches store; budget <= 0 means DefaultBudget.
func New(store replica.Store, budget time.Duration) *Watch {
	if budget <= 0 {
		budget = DefaultBudget
	}
	return &Watch{store: store, budget: budget}
}

// ReadOnly makes the probes read-only (a list and a HEAD), for processes
// that never write the store (read replicas, possibly with read-only keys).
func (w *Watch) ReadOnly() *Watch {
	w.readOnly = true
	return w
}

// Observe records the outcome of a request to the store (an upload or a probe).
func (w *Watch) Observe(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.lastOK, w.lastErr = time.Now(), nil
		return
	}
	w.errors++
	w.lastErr = err
}

// Status is a snapshot of the watch.
type Status struct {
	Ready   bool
	LastOK  time.Time // zero before the first success
	LastErr error     // the failure since LastOK, if any
	Errors  int64     // failures since start
}

// Status reports readiness: the store's latest answer was a success, within
// the budget, and no request is outstanding past the stall threshold.
func (w *Watch) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	ready := w.lastErr == nil && !w.lastOK.IsZero() && time.Since(w.lastOK) <= w.budget
	st := Status{Ready: ready, LastOK: w.lastOK, LastErr: w.lastErr, Errors: w.errors}
	if err := w.stalledLocked(time.Now()); err != nil {
		st.Ready, st.LastErr = false, err
	}
	return st
}

// Intervals returns the probe period while ready and while not.
func (w *Watch) Intervals() (healthy, unhealthy time.Duration) {
	healthy = w.budget / 4
	return healthy, min(healthy, maxUnhealthyProbe)
}

// Run probes the store until ctx ends: a full Probe first and whenever not
// ready, a Ping while ready, and nothing when an upload succeeded recently.
func (w *Watch) Run(ctx context.Context) {
	healthy, unhealthy := w.Intervals()
	for first := true; ; first = false {
		st := w.Status()
		wait := unhealthy
		if st.Ready {
			wait = healthy - time.Since(st.LastOK)
		}
		if wait > 0 && !first {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		st = w.Status()
		if st.Ready && time.Since(st.LastOK) < healthy {
			continue // an upload proved the store meanwhile
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		end := w.Begin()
		var err error
		switch {
		case st.Ready:
			err = replica.Ping(pctx, w.store)
		case w.readOnly:
			_, err = w.store.List(pctx, replica.ProbePrefix)
		default:
			err = replica.Probe(pctx, w.store)
		}
		cancel()
		if ctx.Err() != nil {
			end(errAbandoned) // shutting down: not the store's doing
			return
		}
		end(err)
		w.Observe(err)
	}
}
