package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/ws"
)

// webSocketOr serves Hrana over WebSocket for an upgrade request to / (the
// database from x-namespace, else "default", as sqld) or /db/<name>, and
// hands everything else to next. Upgrades skip the auth middleware: a
// WebSocket client authenticates with its hello message (or, failing that,
// with the upgrade request's Authorization header).
func (s *Server) webSocketOr(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ws.IsUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		name, ok := webSocketDatabase(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		name, at, past := strings.Cut(name, "@") // NAME@POINT: a past state (timetravel.go)
		if err := dbhost.ValidateName(name); err != nil {
			writeError(w, r, err)
			return
		}
		slot := &wsSlot{c: s.wsConns}
		defer slot.release()
		authorize := s.webSocketAuthorizer(r, name, slot)
		if past {
			authorize = s.pastWebSocket(authorize, name, at)
		}
		s.hrana.ServeWebSocket(w, r, authorize)
	})
}

// webSocketDatabase names the database of a WebSocket upgrade's path.
func webSocketDatabase(r *http.Request) (string, bool) {
	p := r.URL.Path
	if p == "/" || p == "" {
		return hranaDatabaseName(r), true
	}
	rest, ok := strings.CutPrefix(p, "/db/")
	if !ok {
		return "", false
	}
	name := strings.TrimSuffix(rest, "/")
	return name, name != "" && !strings.Contains(name, "/")
}

// webSocketAuthorizer checks a hello's JWT (or the upgrade's Authorization
// header when the hello has none) as the HTTP routes check a bearer token: a
// token that may not read the database is refused, a read-only one gets the
// read-only view.
func (s *Server) webSocketAuthorizer(r *http.Request, name string, slot *wsSlot) ws.Authorizer {
	upgradeHeader := r.Header.Get("Authorization")
	return func(ctx context.Context, jwt string) (*ws.Grant, *proto.Error) {
		header := upgradeHeader
		if jwt != "" {
			header = "Bearer " + jwt
		}
		p, err := s.auth.Authenticate(header)
		if err != nil {
			return nil, &proto.Error{Code: dberr.CodeUnauthorized, Message: err.Error()}
		}
		if !p.CanRead(name) {
			return nil, &proto.Error{Code: dberr.CodeForbidden, Message: "this token may not use database \"" + name + "\""}
		}
		owner := ""
		if s.auth.Required() {
			owner = p.Key()
		}
		if e := s.wsConns.take(slot, wsKey(owner, r)); e != nil {
			return nil, e
		}
		readOnly := !p.CanWrite(name)
		return &ws.Grant{Owner: owner, Expires: p.Expires, Open: func(ctx context.Context) (dbhost.Database, error) {
			get := s.host.Get
			if readOnly {
				get = s.host.GetExisting // creating a database is a write
			}
			db, err := get(ctx, name)
			if err != nil {
				return nil, err
			}
			if readOnly {
				db = dbhost.ReadOnly(db)
			}
			return db, nil
		}}, nil
	}
}
