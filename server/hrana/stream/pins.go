package stream

import (
	"context"
	"fmt"
	"net"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// A stream's session keeps its database open (a database with sessions is
// never closed to make room), so one client holding sessions on many
// databases could keep every open slot and lock everyone else out. The
// databases one client holds sessions on at once are capped
// (Config.MaxPinnedDatabases): a client is its token, or its address when
// the server has no authentication.

type clientKey struct{}

// WithClient returns ctx carrying the client's address (http.Request's
// RemoteAddr), which stands for the client when it has no token.
func WithClient(ctx context.Context, remoteAddr string) context.Context {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	return context.WithValue(ctx, clientKey{}, host)
}

// pinKey names who a session counts against: the owner, else the address.
func pinKey(ctx context.Context, owner string) string {
	if owner != "" {
		return "token " + owner
	}
	if a, _ := ctx.Value(clientKey{}).(string); a != "" {
		return "address " + a
	}
	return ""
}

// pin counts a session of key on db, or refuses it when key already holds
// sessions on MaxPinnedDatabases other databases. Called with r.mu held.
func (r *Registry) pin(key, db string) *proto.Error {
	if key == "" {
		return nil
	}
	dbs := r.pins[key]
	if _, ok := dbs[db]; !ok && len(dbs) >= r.cfg.MaxPinnedDatabases {
		who := "this token"
		if key[0] == 'a' {
			who = "this client address"
		}
		return &proto.Error{Code: dberr.CodeUnavailable, Message: fmt.Sprintf(
			"%s already holds streams with open transactions or changed connection settings on %d databases (limits.max-pinned-databases); close some of those streams (or let them idle out), then retry",
			who, r.cfg.MaxPinnedDatabases)}
	}
	if dbs == nil {
		dbs = map[string]int{}
		r.pins[key] = dbs
	}
	dbs[db]++
	return nil
}

// unpin returns what pin counted. Called with r.mu held.
func (r *Registry) unpin(key, db string) {
	if key == "" {
		return
	}
	dbs := r.pins[key]
	if dbs[db]--; dbs[db] <= 0 {
		delete(dbs, db)
	}
	if len(dbs) == 0 {
		delete(r.pins, key)
	}
}
