package hrana

import (
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// Long pipelines (more than longPipeline statements) run a few at a time
// across the server, so that however many a client sends at once, the
// other cores stay free for everyone else's short requests: eight
// concurrent pipelines of thousands of statements on a two-core machine
// otherwise queued every other request behind them in the Go scheduler.
// A long pipeline also yields its core every few statements (pipeline.go),
// so a short request waiting for it runs within microseconds, not after the
// scheduler's 10 ms time slice.

// longPipeline is the number of statements from which a pipeline counts as
// long; longBody the body size (bytes, as the request declares it) from
// which a pipeline takes its slot before its body is read and decoded.
const (
	longPipeline = 100
	longBody     = 256 << 10
)

// inLaneKey marks a request that already holds a slot of the lane.
type inLaneKey struct{}

// newLongLane returns the lane's slots: n, or half the CPUs (at least one).
func newLongLane(n int) chan struct{} {
	if n <= 0 {
		n = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return make(chan struct{}, n)
}

// enterLongLane waits for a slot when a pipeline of n statements is long;
// release gives it back. A pipeline that waits longer than the request
// timeout is answered 503 naming the limit; nothing of it ran.
func (h *Handler) enterLongLane(w http.ResponseWriter, r *http.Request, n int) (release func(), ok bool) {
	if n <= longPipeline {
		return func() {}, true
	}
	wait := h.cfg.RequestTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case h.long <- struct{}{}:
		return func() { <-h.long }, true
	case <-r.Context().Done():
		return nil, false
	case <-t.C:
		w.Header().Set("Retry-After", "1")
		writeHTTPError(w, http.StatusServiceUnavailable, &proto.Error{Code: dberr.CodeUnavailable, Message: fmt.Sprintf(
			"%d pipelines of more than %d statements are already running (limits.max-concurrent-long-pipelines) and this one waited %s; nothing of it ran: retry, or send shorter pipelines",
			cap(h.long), longPipeline, wait)})
		return nil, false
	}
}
