package jsonapi

import (
	"context"
	"net/http"

	"github.com/sluicedb/sluice/internal/largeturn"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dbhost"
)

// SetMaxResponseBytes caps one answer: a larger one is refused as
// SQLITE_TOOBIG naming limits.max-response-bytes, and the statement
// producing it is stopped, so that no client holds more than this much of
// the server's memory (0: no cap).
func (a *API) SetMaxResponseBytes(n int64) { a.maxResponse = int(n) }

// existingGetter opens a database without ever creating it.
type existingGetter interface {
	GetExisting(ctx context.Context, name string) (dbhost.Database, error)
}

// opener opens the request's database: a caller that may not write it
// never creates it (the default database is otherwise created on first use).
func (a *API) opener(r *http.Request) func(context.Context, string) (dbhost.Database, error) {
	p := auth.FromContext(r.Context())
	return func(ctx context.Context, name string) (dbhost.Database, error) {
		if h, ok := a.host.(existingGetter); ok && !p.CanWrite(name) {
			return h.GetExisting(ctx, name)
		}
		return a.host.Get(ctx, name)
	}
}

// largeAnswer is the size past which an answer being built takes a turn of
// largeTurns: encoding rows is CPU work, and a few clients asking for
// megabytes at once would otherwise take every core from the short
// requests of everyone else. The turn is kept until the answer is built.
const largeAnswer = largeturn.Size

// largeTurns lets half the CPUs (at least one) build large answers at once,
// shared with Hrana's answers.
var largeTurns = largeturn.Slots

func (e *resultsEncoder) beginLarge() {
	ctx := e.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	select {
	case largeTurns <- struct{}{}:
		e.big = true
	case <-ctx.Done(): // the statement is being stopped anyway
	}
}

func (e *resultsEncoder) endLarge() {
	if e.big {
		e.big = false
		<-largeTurns
	}
}
