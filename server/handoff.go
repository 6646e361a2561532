package server

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
)

// Hand-off on SIGTERM in multi-instance mode: the leader stops
// writing, ships and releases its leases, then keeps listening for a moment
// and forwards the requests that still reach it (clients and load balancers
// that have not noticed yet) to whoever takes each lease over.

// handoffMaxGrace bounds how long a released leader keeps forwarding;
// handoffQuiet ends it early once no request has arrived for that long.
const (
	handoffMaxGrace = 5 * time.Second
	handoffQuiet    = 500 * time.Millisecond
)

// handoffState is the server's hand-off bookkeeping.
type handoffState struct {
	active   atomic.Bool
	inflight atomic.Int64
	local    atomic.Int64 // requests using this instance's databases
	lastSeen atomic.Int64 // unix nanos of the last request's arrival
}

// enterLocal registers a request about to use the local databases; false
// means the hand-off has begun and the request must be forwarded instead.
// Increment first, check second (and the opposite order in waitLocal), so
// the closing host never races a request it did not wait for.
func (h *handoffState) enterLocal() bool {
	h.local.Add(1)
	if h.active.Load() {
		h.local.Add(-1)
		return false
	}
	return true
}

func (h *handoffState) leaveLocal() { h.local.Add(-1) }

// begin starts the hand-off and waits for local requests to finish.
func (h *handoffState) begin(ctx context.Context) {
	h.active.Store(true)
	for h.local.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// track counts requests so the grace period knows when traffic has stopped.
func (h *handoffState) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inflight.Add(1)
		h.lastSeen.Store(time.Now().UnixNano())
		defer h.inflight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// drain waits until requests stop arriving (or the grace runs out). The
// quiet period counts from the hand-off's start at the earliest: a load
// balancer that has not yet noticed the SIGTERM sends its next request after
// the release, however idle the instance was before it.
func (h *handoffState) drain(ctx context.Context) {
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

// forwardReleased forwards a request for a database this instance has just
// released: it reads the lease from the bucket until another instance holds
// it, then forwards; with no new holder before the deadline it answers a
// retryable 503.
func (s *Server) forwardReleased(w http.ResponseWriter, r *http.Request, name string, deadline time.Time) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, r, dberr.New(dberr.CodeBadRequest, "read request body: "+err.Error()))
		return
	}
	store := dbhost.Sub(s.store, name)
	for {
		rec, _, err := lease.Read(r.Context(), store)
		now := time.Now()
		if err == nil && rec.URL != "" && rec.URL != s.advertiseURL && !rec.Expired(now) && !rec.Released() {
			if s.forward(w, r, body, rec) {
				return
			}
		}
		if now.After(deadline) {
			w.Header().Set("Retry-After", "1")
			writeError(w, r, dberr.New(dberr.CodeUnavailable, "this instance is shutting down and no other instance has taken database "+name+" over yet; retry"))
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
