package ws

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
)

// Grant is what the credential of a hello gives a connection.
type Grant struct {
	// Owner is the identity streams are bound to and quotas counted by (as
	// hrana.WithOwner); a later hello must authenticate the same identity.
	Owner string
	// Expires is when the credential stops being valid (zero: never); the
	// connection is closed then unless a new hello renewed it.
	Expires time.Time
	// Open returns the database view a new stream runs on (read-only for a
	// read-only credential).
	Open func(ctx context.Context) (dbhost.Database, error)
}

// Authorizer checks the credential of a hello (jwt is "" when the hello
// carries none) and says what it grants.
type Authorizer func(ctx context.Context, jwt string) (*Grant, *proto.Error)

// Config tunes the WebSocket server; the Hrana handler fills it in.
type Config struct {
	// MaxMessageBytes bounds one message (the server's body limit).
	MaxMessageBytes int64
	// IdleTimeout closes a connection that has sent nothing and awaits
	// nothing for this long.
	IdleTimeout time.Duration
	// MaxStreamsPerConnection bounds the streams open at once on one connection.
	MaxStreamsPerConnection int
	Logger                  *slog.Logger
}

// Server serves Hrana connections over WebSocket on the streams of a
// stream.Registry, and closes them all on shutdown.
type Server struct {
	cfg     Config
	log     *slog.Logger
	streams *stream.Registry

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	active sync.WaitGroup // connections being set up or served
}

// NewServer returns a server whose streams live in streams.
func NewServer(streams *stream.Registry, cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, streams: streams}
}

// subprotocols in the server's order of preference.
var subprotocols = []string{"hrana3-protobuf", "hrana3", "hrana2", "hrana1"}

const (
	helloTimeout   = 10 * time.Second
	writeTimeout   = 30 * time.Second
	maxInflight    = 256 // requests read but not yet answered, per connection
	streamQueue    = 64  // requests queued on one stream
	maxCursorFetch = 1000
)

// IsUpgrade reports whether r asks to upgrade to a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		headerHasToken(r.Header, "Connection", "upgrade")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Serve upgrades r to Hrana over WebSocket and serves the connection until
// it ends. Credentials come with the hello message (authorize checks them);
// the database is the one the router chose. It returns an error, having
// answered nothing, when the server is shutting down.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, authorize Authorizer) *proto.Error {
	if !s.enter() {
		return &proto.Error{Code: dberr.CodeUnavailable, Message: "the server is shutting down; retry on another instance"}
	}
	defer s.active.Done()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: subprotocols})
	if err != nil {
		s.log.Debug("hrana: WebSocket upgrade failed", "err", err)
		return nil // Accept has answered
	}
	version, protobuf := 0, false
	switch ws.Subprotocol() {
	case "hrana3-protobuf":
		version, protobuf = 3, true
	case "hrana3":
		version = 3
	case "hrana2":
		version = 2
	case "hrana1":
		version = 1
	default:
		_ = ws.Close(websocket.StatusProtocolError, "no Hrana subprotocol: offer hrana3-protobuf, hrana3, hrana2 or hrana1")
		return nil
	}
	ws.SetReadLimit(s.cfg.MaxMessageBytes)
	ctx, cancel := context.WithCancel(stream.WithClient(context.WithoutCancel(r.Context()), r.RemoteAddr)) // the client, for its pinned databases
	c := &conn{
		srv: s, ws: ws, version: version, protobuf: protobuf, authorize: authorize,
		ctx: ctx, cancel: cancel, streams: map[int32]*connStream{}, sqls: map[int32]string{},
		cursors: map[int32]int32{}, inflight: make(chan struct{}, maxInflight),
		started: time.Now(), lastActive: time.Now(),
	}
	if !s.track(c) {
		_ = ws.Close(websocket.StatusGoingAway, "the server is shutting down")
		return nil
	}
	defer s.untrack(c)
	c.serve()
	return nil
}

// enter counts a connection being set up, refusing once the server closes.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active.Add(1)
	return true
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = map[*conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close closes every connection ("going away"), rolls back their open
// transactions and refuses new ones. It returns when they are gone or ctx
// ends.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.closeWith(websocket.StatusGoingAway, "the server is shutting down")
		// Stop what runs: a request in flight is answered as canceled and
		// its transaction rolled back, as when a client disconnects.
		time.AfterFunc(2*time.Second, c.cancel)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.active.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
