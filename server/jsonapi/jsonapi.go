// Package jsonapi is sluice's plain JSON API for curl and load tools:
// POST /v1/databases/{name}/query with {"sql","params"} or {"batch": [...]}
// (one transaction), and PUT/GET/DELETE /v1/databases[/{name}].
//
// It imports server/dbhost and server/auth; the server package mounts it.
package jsonapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/httpjson"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Host is what the API needs from dbhost.Host.
type Host interface {
	Get(ctx context.Context, name string) (dbhost.Database, error)
	Create(ctx context.Context, name string) (dbhost.Database, error)
	List(ctx context.Context) ([]dbhost.Info, error)
	Delete(ctx context.Context, name string, purge bool) error
}

// IdempotencyKeyHeader names a write so that a retry replays its first
// answer; ReplayedHeader marks such a replayed answer.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	ReplayedHeader       = "Idempotent-Replayed"
)

// API serves the JSON routes.
type API struct {
	host           Host
	requestTimeout time.Duration
	maxResponse    int // 0: no cap (SetMaxResponseBytes)
}

// DefaultRequestTimeout bounds all statements of one request when New is
// given no limit.
const DefaultRequestTimeout = 10 * time.Second

// New returns the API over host. requestTimeout bounds the statements of one
// request together (a batch of statements each under the statement limit
// must not hold the writer for long); <= 0 means DefaultRequestTimeout.
func New(host Host, requestTimeout time.Duration) *API {
	if requestTimeout <= 0 {
		requestTimeout = DefaultRequestTimeout
	}
	return &API{host: host, requestTimeout: requestTimeout}
}

// Register adds the API's routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/databases/{name}/query", a.query)
	mux.HandleFunc("GET /v1/databases/{name}/bookmark/{bookmark}", a.bookmark)
	mux.HandleFunc("GET /v1/databases", a.list)
	mux.HandleFunc("PUT /v1/databases/{name}", a.create)
	mux.HandleFunc("GET /v1/databases/{name}", a.get)
	mux.HandleFunc("DELETE /v1/databases/{name}", a.delete)
}

type stmtJSON struct {
	SQL    string          `json:"sql"`
	Params json.RawMessage `json:"params,omitempty"`
}

type queryRequest struct {
	SQL    *string         `json:"sql"`
	Params json.RawMessage `json:"params,omitempty"`
	Batch  []stmtJSON      `json:"batch"`
}

func (a *API) query(w http.ResponseWriter, r *http.Request) {
	if err := a.serveQuery(w, r, a.opener(r)); err != nil {
		WriteError(w, err) // a hosted database never needs another writer
	}
}

// ServeRead answers a query on db, a read replica of the request's
// database, for a server that found the query reads only
// (QueryStatements, followers.StatementsReadOnly). It returns a
// *followers.NeedsWriterError, having written nothing, when the query needs
// the writer after all (a write that only SQLite saw): the caller then
// sends it to the writer.
func (a *API) ServeRead(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	return a.serveQuery(w, r, func(context.Context, string) (dbhost.Database, error) { return db, nil })
}

// QueryStatements returns the SQL of a query request's body, for a server
// deciding before it runs whether a read replica may answer it. A body that
// does not decode holds none: the handler answers it without a database.
func QueryStatements(body []byte) []string {
	stmts, err := readQuery(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	out := make([]string, len(stmts))
	for i, st := range stmts {
		out[i] = st.SQL
	}
	return out
}

// serveQuery runs a query on the database open returns. It answers every
// outcome but one: a *followers.NeedsWriterError (open gave a read replica) is
// returned with nothing written.
func (a *API) serveQuery(w http.ResponseWriter, r *http.Request, open func(context.Context, string) (dbhost.Database, error)) error {
	name := r.PathValue("name")
	p := auth.FromContext(r.Context())
	if err := dbhost.ValidateName(name); err != nil {
		WriteError(w, err)
		return nil
	}
	if !p.CanRead(name) {
		WriteError(w, forbidden(name))
		return nil
	}
	var idem *groupcommit.Idempotency
	body := io.Reader(r.Body)
	if key, ok := r.Header[IdempotencyKeyHeader]; ok {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			WriteError(w, bodyError(err))
			return nil
		}
		if idem, err = groupcommit.NewIdempotency(strings.Join(key, ","), raw); err != nil {
			WriteError(w, err)
			return nil
		}
		body = bytes.NewReader(raw)
	}
	stmts, err := readQuery(body)
	if err != nil {
		WriteError(w, err)
		return nil
	}
	db, err := open(r.Context(), name)
	if err != nil {
		WriteError(w, err)
		return nil
	}
	if !p.CanWrite(name) {
		db = dbhost.ReadOnly(db) // its writes fail with SQLITE_READONLY
	}
	// Reads stream their rows into the answer as SQLite steps them. RunAuto
	// runs the callbacks on this goroutine and returns after them, so the
	// pooled encoder is never touched once it is back in the pool.
	enc := getEncoder()
	enc.max = a.maxResponse
	defer putEncoder(enc)
	q := &request{stmts: stmts, results: make([]sqlconn.Result, len(stmts)), parent: r.Context(),
		limit: a.requestTimeout, name: name, readOnly: !p.CanWrite(name), enc: enc}
	ctx := r.Context()
	if idem != nil { // the key applies to writes only; a read ignores it
		idem.Save = func() ([]byte, error) { return encodeResults(q.results) }
		idem.Load = func(b []byte) error { return decodeResults(b, q.results) }
		ctx = groupcommit.WithIdempotency(ctx, idem)
	}
	b, err := dbhost.RunAuto(ctx, db, q.sqls(), q.runAll)
	if errors.Is(err, dberr.ErrNeedsOwnConnection) {
		b, err = q.runOwn(ctx, db, idem)
	}
	if followers.IsNeedsWriter(err) {
		return err
	}
	results := q.results
	if idem != nil && idem.Replayed() {
		w.Header().Set(ReplayedHeader, "true")
	}
	if b > 0 || err == nil {
		w.Header().Set(dbhost.BookmarkHeader, strconv.FormatUint(uint64(b), 10))
	}
	if err != nil {
		WriteError(w, err)
		return nil
	}
	if q.streamed {
		enc.send(w, b)
		return nil
	}
	writeResults(w, results, b, a.maxResponse)
	return nil
}

// pathDatabase returns the request's {name} once it is valid and the
// caller's token may read it (or write it, with write set); otherwise it has
// answered the error.
func pathDatabase(w http.ResponseWriter, r *http.Request, write bool) (string, bool) {
	name := r.PathValue("name")
	if err := dbhost.ValidateName(name); err != nil {
		WriteError(w, err)
		return "", false
	}
	p := auth.FromContext(r.Context())
	if (write && !p.CanWrite(name)) || (!write && !p.CanRead(name)) {
		WriteError(w, forbidden(name))
		return "", false
	}
	return name, true
}

func forbidden(name string) error {
	return dberr.New(dberr.CodeForbidden, "this token may not do that on database \""+name+"\" (read-only, or limited to other databases)")
}

func statementError(i, n int, err error) error {
	var e *dberr.Error
	if n == 1 || !errors.As(err, &e) {
		return err
	}
	return &dberr.Error{Code: e.Code, Name: e.Name, Message: fmt.Sprintf("statement %d of the batch (nothing of the batch was applied): %s", i+1, e.Message)}
}

// readOnlyToken explains a write refused on a read-only connection.
func readOnlyToken(err error, name string) error {
	var e *dberr.Error
	if !errors.As(err, &e) {
		return err
	}
	return dberr.New(e.Code, e.Message+" (this token has read-only access to database \""+name+"\")")
}

func badRequest(msg string) error {
	return dberr.New(dberr.CodeBadRequest, msg)
}

// decodeQuery parses the body into statements (one, or a batch).
func decodeQuery(body io.Reader) ([]sqlconn.Stmt, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, bodyError(err)
	}
	if err := strictKeys(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var q queryRequest
	if err := dec.Decode(&q); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, dberr.New(dberr.CodeTooLarge, fmt.Sprintf("request body is over the server's limit of %d bytes (limits.max-body-bytes)", mbe.Limit))
		}
		return nil, badRequest("malformed JSON request: " + err.Error() + `; send {"sql": "...", "params": [...]} or {"batch": [...]}`)
	}
	if dec.More() {
		return nil, badRequest("malformed JSON request: trailing data after the object")
	}
	switch {
	case q.SQL != nil && q.Batch != nil:
		return nil, badRequest(`give either "sql" or "batch", not both`)
	case q.SQL != nil:
		st, err := decodeStmt(*q.SQL, q.Params)
		if err != nil {
			return nil, err
		}
		return scriptStatements(st)
	case len(q.Batch) > 0:
		out := make([]sqlconn.Stmt, len(q.Batch))
		for i, s := range q.Batch {
			st, err := decodeStmt(s.SQL, s.Params)
			if err != nil {
				return nil, badRequest(fmt.Sprintf("batch statement %d: %s", i+1, httperr.Message(err)))
			}
			if err := oneStatement(i+1, st); err != nil {
				return nil, err
			}
			out[i] = st
		}
		return out, nil
	}
	return nil, badRequest(`missing "sql" or a non-empty "batch"`)
}

func decodeStmt(sql string, raw json.RawMessage) (sqlconn.Stmt, error) {
	st := sqlconn.Stmt{SQL: sql, WantRows: true} // "" holds no statement: an empty result, as in SQLite
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return st, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var params any
	if err := dec.Decode(&params); err != nil {
		return st, badRequest("params: " + err.Error())
	}
	switch ps := params.(type) {
	case []any:
		st.Args = make([]sqlconn.Value, len(ps))
		for i, p := range ps {
			v, err := decodeValue(p)
			if err != nil {
				return st, badRequest(fmt.Sprintf("params[%d]: %v", i, err))
			}
			st.Args[i] = v
		}
	case map[string]any:
		st.NamedArgs = make(map[string]sqlconn.Value, len(ps))
		for k, p := range ps {
			v, err := decodeValue(p)
			if err != nil {
				return st, badRequest(fmt.Sprintf("params[%q]: %v", k, err))
			}
			if k != "" && k[0] != ':' && k[0] != '@' && k[0] != '$' {
				k = ":" + k
			}
			st.NamedArgs[k] = v
		}
	default:
		return st, badRequest("params must be an array (positional) or an object (named)")
	}
	return st, nil
}

// WriteError writes {"error": {"code", "message"}} with the status
// httperr gives err (500 for errors without a code).
func WriteError(w http.ResponseWriter, err error) {
	status := httperr.Status(err)
	fields := map[string]string{"code": httperr.Code(err), "message": httperr.Message(err)}
	var nd *groupcommit.NotDurableError
	if errors.As(err, &nd) {
		// Not a 503: the write committed, so no Retry-After; the bookmark
		// lets the client ask whether it became durable.
		fields["bookmark"] = strconv.FormatUint(uint64(nd.TXID), 10)
		w.Header().Set(dbhost.BookmarkHeader, fields["bookmark"])
	}
	httperr.SetRetryAfter(w.Header(), status)
	httpjson.Write(w, status, map[string]any{"error": fields})
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	infos, err := a.host.List(r.Context())
	if err != nil {
		WriteError(w, err)
		return
	}
	visible := []dbhost.Info{}
	for _, in := range infos {
		if p.CanRead(in.Name) {
			visible = append(visible, in)
		}
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"databases": visible})
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	name, ok := pathDatabase(w, r, true)
	if !ok {
		return
	}
	if _, err := a.host.Create(r.Context(), name); err != nil {
		WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusCreated, a.info(r.Context(), name))
}

func (a *API) info(ctx context.Context, name string) any {
	// One database's entry without listing every other (and the bucket).
	if d, ok := a.host.(interface {
		Describe(string) (dbhost.Info, bool)
	}); ok {
		if in, ok := d.Describe(name); ok {
			return in
		}
	}
	infos, _ := a.host.List(ctx)
	for _, in := range infos {
		if in.Name == name {
			return in
		}
	}
	return map[string]string{"name": name}
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	name, ok := pathDatabase(w, r, false)
	if !ok {
		return
	}
	if _, err := a.opener(r)(r.Context(), name); err != nil {
		WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, a.info(r.Context(), name))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	name, ok := pathDatabase(w, r, true)
	if !ok {
		return
	}
	purge := r.URL.Query().Get("purge") == "true"
	if err := a.host.Delete(r.Context(), name, purge); err != nil {
		WriteError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"deleted": name, "replica_purged": purge})
}
