package server

import (
	"bytes"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/forward"
	"github.com/sluicedb/sluice/server/hrana"
	"github.com/sluicedb/sluice/server/httpjson"
	"github.com/sluicedb/sluice/server/jsonapi"
	"github.com/sluicedb/sluice/server/libsqlsync"
	"github.com/sluicedb/sluice/server/metrics"
)

// routes builds the handler: open routes (/health, /version), then
// everything else behind the body limit and authentication.
func (s *Server) routes() http.Handler {
	api := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) { api.Handle(pattern, s.instrument(pattern, h)) }

	j := jsonapi.New(s.host, time.Duration(s.cfg.Limits.RequestTimeout))
	j.SetMaxResponseBytes(int64(s.lim.MaxResponseBytes))
	jm := http.NewServeMux()
	j.Register(jm)
	handle("GET /v1/databases", jm.ServeHTTP)
	// Reads a follower may answer, judged before they run (package forward).
	jsonRead := &forward.Reader{
		Inspect: func(r *http.Request, body []byte) forward.Read {
			return forward.Read{Replica: true, Statements: jsonapi.QueryStatements(body)}
		},
		Serve: j.ServeRead,
	}
	hranaRead := &forward.Reader{
		Inspect: func(r *http.Request, body []byte) forward.Read {
			v := hrana.InspectRead(r.URL.Path, body)
			return forward.Read{Replica: v.Replica, Statements: v.Statements, Bookmark: v.ReplicationIndex}
		},
		Serve: s.serveHranaRead,
	}
	handle("POST /v1/databases/{name}/query", s.jsonAt(j, s.perDatabase(jm.ServeHTTP, jsonRead)))
	handle("PUT /v1/databases/{name}", s.perDatabase(s.databaseQuota(s.branchOr(jm.ServeHTTP)), nil))
	for _, p := range []string{"GET /v1/databases/{name}", "GET /v1/databases/{name}/bookmark/{bookmark}"} {
		handle(p, s.perDatabase(s.databaseQuota(jm.ServeHTTP), nil))
	}
	handle("DELETE /v1/databases/{name}", s.forgetPastOnDelete(s.perDatabase(s.databaseQuota(jm.ServeHTTP), nil)))
	for _, p := range hranaPaths {
		handle(p, s.perDatabase(s.serveHrana, hranaRead))
		handle("/db/{name}"+p, s.hranaAt(s.perDatabase(s.serveHrana, hranaRead)))
	}
	// The lease holder's stream of shipped TXIDs, for other instances
	// (pushes.go): served here, never forwarded.
	handle("GET /v1/databases/{name}/shipped", s.servePush)
	// libSQL's embedded-replica sync (package libsqlsync): reads, so an
	// instance that does not write the database answers them from its
	// follower (embedded.go).
	handle("GET /db/{name}/info", s.syncRoute(s.sync.Info))
	handle("GET /db/{name}/export/{generation}", s.syncRoute(s.sync.Export))
	handle("GET /db/{name}/sync/{generation}/{start}/{end}", s.syncRoute(s.sync.Sync))
	handle("POST /db/{name}/sync/{generation}/{start}/{end}", s.sync.RefusePush)
	// sqld's legacy API ({"statements": [...]}): the root serves the database
	// Hrana's root routes serve, /db/NAME/ the named one.
	handle("POST /{$}", s.perDatabase(s.serveHrana, hranaRead))
	handle("POST /db/{name}/{$}", s.hranaAt(s.perDatabase(s.serveHrana, hranaRead)))
	handle("/", func(w http.ResponseWriter, r *http.Request) {
		msg := r.Method + " " + r.URL.Path + " is not a sluice endpoint; see /v1/databases, /v2/pipeline, /v3/pipeline, /metrics"
		if droppedDatabaseName(r.URL.Path) {
			msg += " (a libSQL client resolves its URL's last segment away: write the database URL with a trailing slash, libsql://HOST/db/NAME/)"
		}
		writeError(w, r, dberr.New(dberr.CodeNotFound, msg))
	})

	limited := s.limitBody(s.auth.Middleware(api, func(w http.ResponseWriter, r *http.Request, err error) {
		refuseBody(w, r)
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeError(w, r, dberr.New(dberr.CodeUnauthorized, err.Error()))
	}))
	root := http.NewServeMux()
	root.Handle("GET /health", s.instrument("GET /health", func(w http.ResponseWriter, r *http.Request) {
		httpjson.Write(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	root.Handle("GET /ready", s.instrument("GET /ready", s.serveReady))
	root.Handle("GET /version", s.instrument("GET /version", func(w http.ResponseWriter, r *http.Request) {
		httpjson.Write(w, http.StatusOK, map[string]string{"version": s.version, "server": "sluice"})
	}))
	root.Handle("GET /metrics", s.instrument("GET /metrics", s.serveMetrics))
	root.Handle("/", s.webSocketOr(limited))
	// A sync URL may ask its syncs to wait for the next transaction
	// (.../db/NAME/wait/5s/): the same routes, the wait noted.
	return libsqlsync.WaitPath(libsqlsync.CleanPath(root), writeError)
}

// serveMetrics answers a scrape. When credentials are configured it needs
// one: the metrics_token (every series) or any valid token, which sees only
// the per-database series of databases it may read, so that a token limited
// to one database does not learn the names of the others.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	var keep metrics.Filter
	header := r.Header.Get("Authorization")
	if !s.isMetricsToken(header) {
		p, err := s.auth.Authenticate(header)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			writeError(w, r, dberr.New(dberr.CodeUnauthorized, err.Error()+" (/metrics takes any valid token, or the metrics_token)"))
			return
		}
		if p.Databases != nil {
			keep = func(names, values []string) bool {
				for i, n := range names {
					if n == "db" && i < len(values) && values[i] != "" && !p.CanRead(values[i]) {
						return false
					}
				}
				return true
			}
		}
	}
	// Rendered whole first: the registry's locks are never held while a
	// scraper reads (or does not).
	var buf bytes.Buffer
	s.metrics.reg.WriteFiltered(&buf, keep)
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.Write(buf.Bytes())
}

func (s *Server) isMetricsToken(header string) bool {
	want := s.cfg.MetricsToken
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	return want != "" && ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(want)) == 1
}

// limitBody caps request bodies (413 from the JSON decoder; Hrana has the same cap).
func (s *Server) limitBody(next http.Handler) http.Handler {
	limit := maxBodyBytes(s.cfg.Limits)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			refuseBody(w, r)
			writeError(w, r, dberr.New(dberr.CodeTooLarge, "request body of "+strconv.FormatInt(r.ContentLength, 10)+" bytes is over the server's limit of "+strconv.FormatInt(limit, 10)+" (limits.max-body-bytes)"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

func maxBodyBytes(l Limits) int64 {
	if l.MaxBodyBytes <= 0 {
		return DefaultMaxBodyBytes
	}
	return int64(l.MaxBodyBytes)
}

// statusWriter records the status for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status int
	onHead func(http.Header)
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.onHead != nil {
			w.onHead(w.Header())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// instrument records requests and latency by route and database and logs
// server errors.
func (s *Server) instrument(route string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		r = withReadAfter(r)
		h(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		db := r.PathValue("name")
		if strings.Contains(route, "/v") && db == "" && !strings.HasPrefix(route, "GET /v1/databases") && route != "GET /version" {
			db = hranaDatabaseName(r)
		}
		if db != "" && !s.host.Exists(db) {
			db = "" // series only for databases that exist: names refused or not found leave nothing
		}
		s.metrics.request(route, db, sw.status, time.Since(start))
		if sw.status >= 500 {
			s.log.Warn("request failed", "route", route, "db", db, "status", sw.status)
		}
	})
}

// hranaDatabaseName picks the database for a Hrana request: the path
// (/db/<name>/...), else the x-namespace header (sqld), else "default".
func hranaDatabaseName(r *http.Request) string {
	if name := r.PathValue("name"); name != "" {
		return name
	}
	if ns := r.Header.Get("x-namespace"); ns != "" {
		return ns
	}
	return dbhost.DefaultDatabase
}

// serveHrana selects the database, checks the principal's access to it and
// calls the Hrana handler with the database in the context. A read-only
// principal gets a read-only view of the database.
func (s *Server) serveHrana(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet { // GET /v2, /v3: version probes need no database
		s.hrana.ServeHTTP(w, r)
		return
	}
	name, owner, readOnly, ok := s.hranaAccess(w, r)
	if !ok {
		return
	}
	get := s.host.Get
	if readOnly {
		get = s.host.GetExisting // creating a database is a write
	}
	db, err := get(r.Context(), name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if readOnly {
		db = dbhost.ReadOnly(db)
	}
	// The bookmark is taken when the response starts, after the handler ran.
	if sw, ok := w.(*statusWriter); ok {
		sw.onHead = func(h http.Header) {
			h.Set(dbhost.BookmarkHeader, strconv.FormatUint(uint64(dbhost.CurrentBookmark(db)), 10))
		}
	}
	ctx := hrana.WithOwner(hrana.WithDatabase(r.Context(), db), owner)
	s.hrana.ServeHTTP(w, r.WithContext(ctx))
}

// serveHranaRead is Hrana's read path on a follower (forward.Reader): the
// checks of serveHrana, on the follower's database db.
func (s *Server) serveHranaRead(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	_, owner, readOnly, ok := s.hranaAccess(w, r)
	if !ok {
		return nil
	}
	if readOnly {
		db = dbhost.ReadOnly(db)
	}
	return s.hrana.ServeRead(w, r.WithContext(hrana.WithOwner(r.Context(), owner)), db)
}

// hranaAccess names a Hrana request's database and checks that the
// principal may use it; owner binds the request's streams to the principal.
// It has answered the request when ok is false.
func (s *Server) hranaAccess(w http.ResponseWriter, r *http.Request) (name, owner string, readOnly, ok bool) {
	name = hranaDatabaseName(r)
	p := auth.FromContext(r.Context())
	if err := dbhost.ValidateName(name); err != nil {
		writeError(w, r, err)
		return "", "", false, false
	}
	if !p.CanRead(name) {
		writeError(w, r, dberr.New(dberr.CodeForbidden, "this token may not use database \""+name+"\""))
		return "", "", false, false
	}
	if s.auth.Required() {
		owner = p.Key()
	}
	return name, owner, !p.CanWrite(name), true
}
