package jsonapi

import (
	"context"
	"net/http"

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
