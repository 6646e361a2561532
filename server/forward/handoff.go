package forward

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
)

// Hand-off on SIGTERM in multi-instance mode: the writer stops writing,
// ships and releases its leases, then keeps listening for a moment and
// proxies the requests that still reach it (clients and load balancers that
// have not noticed yet) to whoever takes each lease over.

// handoffMaxGrace bounds how long a released writer keeps forwarding;
// handoffQuiet ends it early once no request has arrived for that long.
const (
	handoffMaxGrace = 5 * time.Second
	handoffQuiet    = 500 * time.Millisecond
)

// handoff is the hand-off's bookkeeping.
type handoff struct {
	active   atomic.Bool
	inflight atomic.Int64
	local    atomic.Int64 // requests using this instance's databases
	lastSeen atomic.Int64 // unix nanos of the last request's arrival
}

// enterLocal registers a request about to use the local databases; false
// means the hand-off has begun and the request must be forwarded instead.
// Increment first, check second (and the opposite order in BeginHandoff),
// so the closing host never races a request it did not wait for.
func (h *handoff) enterLocal() bool {
	h.local.Add(1)
	if h.active.Load() {
		h.local.Add(-1)
		return false
	}
	return true
}

func (h *handoff) leaveLocal() { h.local.Add(-1) }

// BeginHandoff starts the hand-off: from now on every request goes to the
// databases' next writers. It returns once the requests using the local
// databases have finished, so that the host can close them.
func (f *Forwarder) BeginHandoff(ctx context.Context) {
	h := &f.handoff
	h.active.Store(true)
	for h.local.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Track counts the requests next serves, so that DrainHandoff knows when
// traffic has stopped.
func (f *Forwarder) Track(next http.Handler) http.Handler {
	h := &f.handoff
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inflight.Add(1)
		h.lastSeen.Store(time.Now().UnixNano())
		defer h.inflight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// DrainHandoff waits until requests stop arriving (or the grace runs out).
// The quiet period counts from the hand-off's start at the earliest: a load
// balancer that has not yet noticed the SIGTERM sends its next request
// after the release, however idle the instance was before it.
func (f *Forwarder) DrainHandoff(ctx context.Context) {
	h := &f.handoff
	start := time.Now()
	deadline := start.Add(handoffMaxGrace)
	for time.Now().Before(deadline) {
		quietFor := min(time.Since(time.Unix(0, h.lastSeen.Load())), time.Since(start))
		if h.inflight.Load() == 0 && quietFor > handoffQuiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// toNextWriter proxies a request for a database this instance has just
// released to whoever holds its lease next (nextWriter); with no new
// holder before the deadline it answers a retryable 503.
func (f *Forwarder) toNextWriter(w http.ResponseWriter, r *http.Request, name string, deadline time.Time) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.cfg.WriteError(w, r, bodyError(err))
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	for {
		rec, err := f.nextWriter(ctx, name)
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			w.Header().Set("Retry-After", "1")
			f.cfg.WriteError(w, r, dberr.New(dberr.CodeUnavailable, "this instance is shutting down and no other instance has taken database "+name+" over yet; retry"))
			return
		}
		if f.proxy(w, r, name, body, rec, deadline) {
			return
		}
		// The holder could not be reached: read the lease again a little later.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
