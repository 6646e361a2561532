package libsqlsync

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
)

// Long-polling. libSQL's clients build every request by appending to the
// sync URL the application gave them ("/info", "/sync/…", and for writes
// Hrana's "/v2/pipeline"), and send no header an application could set, so
// a replica asks to wait through its URL: http://HOST/db/NAME/wait/DURATION/
// serves exactly what http://HOST/db/NAME/ serves, except that a sync
// finding nothing new waits up to DURATION for the next transaction and
// answers as soon as it is shipped. Without the segment nothing waits: an
// empty sync stays one small request answered at once.

// MaxWait bounds the wait a sync URL may ask for: well under the server's
// write timeout, and short enough that a shutdown never waits long for it.
const MaxWait = 10 * time.Second

type waitKey struct{}

// waitOf is the wait the request's URL asked for (0: none).
func waitOf(ctx context.Context) time.Duration {
	d, _ := ctx.Value(waitKey{}).(time.Duration)
	return d
}

// WaitPath serves /db/NAME/wait/DURATION/REST as /db/NAME/REST with the
// wait recorded for Sync. A duration that does not parse, is not positive
// or is over MaxWait is refused with writeError, naming the limit.
func WaitPath(next http.Handler, writeError func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/db/")
		name, rest, ok2 := strings.Cut(rest, "/")
		after, ok3 := strings.CutPrefix(rest, "wait/")
		if !ok || !ok2 || !ok3 || name == "" {
			next.ServeHTTP(w, r)
			return
		}
		dur, tail, _ := strings.Cut(after, "/")
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 || d > MaxWait {
			writeError(w, r, dberr.New(dberr.CodeBadRequest, fmt.Sprintf(
				"sync URL .../db/%s/wait/%s/: the wait must be a duration from 1ms to %s (e.g. /db/%s/wait/5s/)", name, dur, MaxWait, name)))
			return
		}
		r2 := r.Clone(context.WithValue(r.Context(), waitKey{}, d))
		r2.URL.Path = "/db/" + name + "/" + tail
		r2.URL.RawPath = ""
		next.ServeHTTP(w, r2)
	})
}

// maxContinuations bounds the connections remembered by sent.
const maxContinuations = 4096

// sent notes that a waiting client's connection was just sent frames
// bringing it to frames frames of generation gen: libSQL's client asks
// again at once on the same connection, and that request ends its sync()
// call, so it must not wait (continued).
func (h *Handler) sent(r *http.Request, gen, frames uint64) {
	if waitOf(r.Context()) <= 0 {
		return
	}
	h.contMu.Lock()
	defer h.contMu.Unlock()
	if h.cont == nil || len(h.cont) >= maxContinuations {
		h.cont = map[string][2]uint64{} // forgetting costs one sync() a wait, nothing more
	}
	h.cont[r.RemoteAddr] = [2]uint64{gen, frames}
}

// continued reports (once) whether a request from addr at frames frames
// of generation gen follows frames sent on the same connection.
func (h *Handler) continued(addr string, gen, frames uint64) bool {
	h.contMu.Lock()
	defer h.contMu.Unlock()
	k, ok := h.cont[addr]
	if ok {
		delete(h.cont, addr)
	}
	return ok && k == [2]uint64{gen, frames}
}
