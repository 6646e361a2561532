package hrana

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
	"github.com/sluicedb/sluice/server/hrana/ws"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/httpjson"
)

// Config tunes the handler. Zero values take the defaults below.
type Config struct {
	// IdleTimeout closes a stream (rolling back its transaction) after this long
	// without a request. Default 10 s.
	IdleTimeout time.Duration
	// TxTimeout rolls back an interactive transaction that stays open longer
	// than this, because it holds the database's writer. Default 5 s.
	TxTimeout time.Duration
	// BatonKey signs batons; empty means a random key (batons then do not
	// survive a restart, which is fine: neither do streams).
	BatonKey []byte
	Logger   *slog.Logger
	Version  string

	// Stream quotas, so that no caller can exhaust streams another needs:
	// open streams per token (WithOwner), per database and in all.
	// Defaults 1000, 5000, 20000.
	MaxStreamsPerToken    int
	MaxStreamsPerDatabase int
	MaxStreams            int
	// MaxSessionsPerToken bounds the interactive transactions one token holds
	// open at once (the database's own budget bounds them per database).
	// Default 16.
	MaxSessionsPerToken int
	// MaxPinnedDatabases bounds the databases one token (or client address)
	// holds sessions on at once. Default 8.
	MaxPinnedDatabases int
	// MaxPipelineStatements bounds the requests of one HTTP pipeline
	// [DefaultMaxPipelineStatements].
	MaxPipelineStatements int
	// MaxConcurrentLongPipelines bounds the pipelines of more than 100
	// statements running at once across the server (lane.go) [half the
	// CPUs, at least 1].
	MaxConcurrentLongPipelines int
	// RequestTimeout bounds one HTTP request: every statement of its batches
	// and pipeline, including the time it holds the writer. Past it the
	// request's work is rolled back and it is answered REQUEST_TIMEOUT.
	// Default 10 s.
	RequestTimeout time.Duration
	// MaxResponseBytes bounds what one request's answer holds, all its
	// statements together: the statement whose rows would pass it is
	// stopped and fails SQLITE_TOOBIG naming limits.max-response-bytes.
	// 0: no limit.
	MaxResponseBytes int64

	// MaxBodyBytes bounds one HTTP request body and one WebSocket message:
	// the server passes its configured body limit, so one setting governs
	// every route. Default 8 MiB.
	MaxBodyBytes int64
	// WebSocketIdleTimeout closes a WebSocket connection that has sent
	// nothing and awaits nothing for this long. Default 2 min.
	WebSocketIdleTimeout time.Duration
	// MaxStreamsPerConnection bounds the streams open at once on one
	// WebSocket connection. Default 128.
	MaxStreamsPerConnection int
}

const (
	defaultMaxBodyBytes         = 8 << 20 // same default as the server's request limit
	defaultWebSocketIdleTimeout = 2 * time.Minute
	defaultMaxStreamsPerConn    = 128
)

// Handler serves Hrana over HTTP for the database found in the request
// context, and over WebSocket (server/hrana/ws) for the one the router chose.
type Handler struct {
	cfg     Config
	log     *slog.Logger
	streams *stream.Registry
	ws      *ws.Server
	long    chan struct{} // slots of the long-pipeline lane (lane.go)

	closeOnce sync.Once
}

// NewHandler returns a handler and starts its stream reaper; call Close to stop it.
func NewHandler(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxBodyBytes
	}
	if cfg.WebSocketIdleTimeout <= 0 {
		cfg.WebSocketIdleTimeout = defaultWebSocketIdleTimeout
	}
	if cfg.MaxStreamsPerConnection <= 0 {
		cfg.MaxStreamsPerConnection = defaultMaxStreamsPerConn
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	streams := stream.NewRegistry(stream.Config{
		IdleTimeout:           cfg.IdleTimeout,
		TxTimeout:             cfg.TxTimeout,
		BatonKey:              cfg.BatonKey,
		Logger:                log,
		MaxStreamsPerToken:    cfg.MaxStreamsPerToken,
		MaxStreamsPerDatabase: cfg.MaxStreamsPerDatabase,
		MaxStreams:            cfg.MaxStreams,
		MaxSessionsPerToken:   cfg.MaxSessionsPerToken,
		MaxPinnedDatabases:    cfg.MaxPinnedDatabases,
		RequestTimeout:        cfg.RequestTimeout,
		MaxResponseBytes:      int(cfg.MaxResponseBytes),
	})
	return &Handler{
		long:    newLongLane(cfg.MaxConcurrentLongPipelines),
		cfg:     cfg,
		log:     log,
		streams: streams,
		ws: ws.NewServer(streams, ws.Config{
			MaxMessageBytes:         cfg.MaxBodyBytes,
			IdleTimeout:             cfg.WebSocketIdleTimeout,
			MaxStreamsPerConnection: cfg.MaxStreamsPerConnection,
			Logger:                  log,
		}),
	}
}

type dbKey struct{}

type ownerKey struct{}

// WithOwner returns ctx carrying the identity of the caller (for example a
// hash of its token and its access level). Streams are bound to it: a baton
// is refused for any other owner, and quotas are counted per owner. The
// empty owner (a server without credentials: one caller) has no per-token
// quotas; the per-database and total ones still apply.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

func ownerFrom(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

// WithDatabase returns ctx carrying the database a request addresses.
func WithDatabase(ctx context.Context, db dbhost.Database) context.Context {
	return context.WithValue(ctx, dbKey{}, db)
}

func databaseFrom(ctx context.Context) dbhost.Database {
	db, _ := ctx.Value(dbKey{}).(dbhost.Database)
	return db
}

// ServeHTTP routes GET /v2 /v3 /v3-protobuf, POST /v2/pipeline /v3/pipeline
// /v3/cursor /v3-protobuf/pipeline /v3-protobuf/cursor /v1/execute
// /v1/batch, with or without a leading /db/<name>.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := stripDatabasePrefix(r.URL.Path)
	var post func(http.ResponseWriter, *http.Request, dbhost.Database) error
	switch path {
	case "/v2", "/v3", "/v2/", "/v3/", "/v3-protobuf", "/v3-protobuf/":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeHTTPError(w, http.StatusMethodNotAllowed, &proto.Error{Code: dberr.CodeMethodNotAllowed, Message: "use GET on " + path})
			return
		}
		w.WriteHeader(http.StatusOK)
		return
	case "/v3/cursor":
		post = answersAlways(h.serveCursor)
	case "/v3-protobuf/cursor":
		post = answersAlways(h.serveCursorProtobuf)
	default:
		if post = h.readablePost(path); post == nil {
			writeHTTPError(w, http.StatusNotFound, &proto.Error{Code: dberr.CodeNotFound, Message: "no Hrana endpoint at " + r.URL.Path})
			return
		}
	}
	if r.Method != http.MethodPost {
		writeHTTPError(w, http.StatusMethodNotAllowed, &proto.Error{Code: dberr.CodeMethodNotAllowed, Message: "use POST on " + path})
		return
	}
	db := databaseFrom(r.Context())
	if db == nil {
		writeHTTPError(w, http.StatusInternalServerError, &proto.Error{Code: "NO_DATABASE",
			Message: "the router passed no database to the Hrana handler (server bug)"})
		return
	}
	if err := post(w, r, db); err != nil {
		// Only a read replica needs the writer, and it is served by ServeRead.
		WriteError(w, err)
	}
}

// readablePost returns the handler of a POST route that a read replica may
// answer (pipelines and Hrana 1 requests, which InspectRead understands),
// or nil. Each returns a *followers.NeedsWriterError, having answered nothing,
// when its database is a read replica that refused a write or a session.
func (h *Handler) readablePost(path string) func(http.ResponseWriter, *http.Request, dbhost.Database) error {
	switch path {
	case "/v2/pipeline", "/v3/pipeline":
		return h.servePipeline
	case "/v3-protobuf/pipeline":
		return h.servePipelineProtobuf
	case "/v1/execute":
		return h.serveV1Execute
	case "/v1/batch":
		return h.serveV1Batch
	case "/":
		return h.serveLegacy
	}
	return nil
}

// answersAlways adapts a handler that always answers (a cursor, which a
// read replica never serves) to the shape of the readable ones.
func answersAlways(serve func(http.ResponseWriter, *http.Request, dbhost.Database)) func(http.ResponseWriter, *http.Request, dbhost.Database) error {
	return func(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
		serve(w, r, db)
		return nil
	}
}

// stripDatabasePrefix removes a leading /db/<name> so that a client URL of
// http://host/db/<name>/ resolves "v2/pipeline" to a Hrana route.
func stripDatabasePrefix(p string) string {
	if rest, ok := strings.CutPrefix(p, "/db/"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			p = rest[i:]
		} else {
			p = "/"
		}
	}
	for strings.HasPrefix(p, "//") {
		p = p[1:]
	}
	return p
}

// Close closes the WebSocket connections, rolls back and closes every open
// stream and stops the reaper.
func (h *Handler) Close() {
	h.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		h.CloseWebSockets(ctx)
		cancel()
		h.streams.Close()
	})
}

// endOnPanic, deferred by every request that holds a stream, turns a panic
// into a 500 answer and ends the stream: its transaction is rolled back and
// its session closed, so no lock outlives the request. released says
// whether the request already gave the stream back.
func (h *Handler) endOnPanic(w http.ResponseWriter, s *stream.Stream, released *bool) {
	p := recover()
	if p == nil {
		return
	}
	h.log.Error("hrana: a request panicked; its stream was closed and its transaction rolled back", "panic", p, "stack", string(debug.Stack()))
	e := &proto.Error{Code: dberr.CodeInternalError, Message: fmt.Sprintf(
		"internal error (%v); the stream was closed and its transaction, if any, rolled back: start a new stream", p)}
	if !*released {
		h.streams.Abandon(s, e)
	}
	writeHTTPError(w, http.StatusInternalServerError, e)
}

// readBody reads a request body of at most the configured body limit.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *proto.Error) {
	body := http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &proto.Error{Code: "BODY_TOO_LARGE", Message: fmt.Sprintf("request body is over %d bytes; split the work into smaller requests", h.cfg.MaxBodyBytes)}
		}
		return nil, &proto.Error{Code: dberr.CodeProtocolError, Message: "could not read the request body: " + err.Error()}
	}
	return data, nil
}

// decodeBody reads a JSON request body of at most the configured body limit.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, into any) *proto.Error {
	data, e := h.readBody(w, r)
	if e != nil {
		return e
	}
	return notHranaJSON(json.Unmarshal(data, into))
}

// notHranaJSON is the answer to a body a decoder refused (nil for nil).
func notHranaJSON(err error) *proto.Error {
	if err == nil {
		return nil
	}
	return &proto.Error{Code: dberr.CodeProtocolError, Message: "request body is not valid Hrana JSON: " + err.Error()}
}

// httpError is the body of a 4xx/5xx answer: Hrana's Error plus "error" as a
// plain string, the shape libsql-client-go looks for first.
type httpError struct {
	Message      string `json:"message"`
	Code         string `json:"code,omitempty"`
	ExtendedCode string `json:"extended_code,omitempty"`
	Err          string `json:"error"`
}

func writeHTTPError(w http.ResponseWriter, status int, e *proto.Error) {
	writeJSON(w, status, httpError{Message: e.Message, Code: e.Code, ExtendedCode: e.ExtendedCode, Err: e.Message}, 0)
}

// writeJSON answers with exactly "application/json": @libsql/client parses
// error bodies only for that content type, without parameters.
func writeJSON(w http.ResponseWriter, status int, v any, bm dbhost.Bookmark) {
	if bm > 0 {
		w.Header().Set(dbhost.BookmarkHeader, formatBookmark(bm))
	}
	if err := httpjson.Write(w, status, v); err != nil {
		w.Header().Del(dbhost.BookmarkHeader)
		httpjson.Write(w, http.StatusInternalServerError, map[string]string{
			"message": "could not encode the response", "code": dberr.CodeInternalError, "error": "could not encode the response"})
	}
}

// WriteError answers an HTTP request on a Hrana route with err, in the
// shape Hrana clients read (top-level "message" and "code"), so that a
// client shows the reason rather than only the status. An error with a
// dberr code gets httperr's status; anything else is a 500.
func WriteError(w http.ResponseWriter, err error) {
	if dberr.As(err) == nil {
		writeHTTPError(w, http.StatusInternalServerError, &proto.Error{Code: dberr.CodeInternalError, Message: err.Error()})
		return
	}
	status := httperr.Status(err)
	httperr.SetRetryAfter(w.Header(), status)
	var nd *groupcommit.NotDurableError
	if errors.As(err, &nd) {
		w.Header().Set(dbhost.BookmarkHeader, formatBookmark(dbhost.Bookmark(nd.TXID)))
	}
	writeHTTPError(w, status, &proto.Error{Code: httperr.Code(err), Message: httperr.Message(err)})
}
