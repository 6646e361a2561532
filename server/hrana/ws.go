package hrana

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// Hrana over WebSocket (versions 1 to 3, JSON and protobuf). One connection
// multiplexes streams; each stream is a stream as the HTTP pipeline knows it
// (its own transaction state, session and quota slot) run by its own worker,
// so requests on one stream run in order while streams run side by side.

// WSGrant is what the credential of a hello gives a connection.
type WSGrant struct {
	// Owner is the identity streams are bound to and quotas counted by (as
	// WithOwner); a later hello must authenticate the same identity.
	Owner string
	// Expires is when the credential stops being valid (zero: never); the
	// connection is closed then unless a new hello renewed it.
	Expires time.Time
	// Open returns the database view a new stream runs on (read-only for a
	// read-only credential).
	Open func(ctx context.Context) (dbhost.Database, error)
}

// WSAuthorizer checks the credential of a hello (jwt is "" when the hello
// carries none) and says what it grants.
type WSAuthorizer func(ctx context.Context, jwt string) (*WSGrant, *proto.Error)

// wsSubprotocols in the server's order of preference.
var wsSubprotocols = []string{"hrana3-protobuf", "hrana3", "hrana2", "hrana1"}

const (
	wsHelloTimeout   = 10 * time.Second
	wsWriteTimeout   = 30 * time.Second
	wsMaxInflight    = 256 // requests read but not yet answered, per connection
	wsStreamQueue    = 64  // requests queued on one stream
	wsMaxCursorFetch = 1000
)

// IsWebSocket reports whether r asks to upgrade to a WebSocket.
func IsWebSocket(r *http.Request) bool {
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

// ServeWebSocket upgrades r to Hrana over WebSocket and serves the
// connection until it ends. Credentials come with the hello message
// (authorize checks them); the database is the one the router chose.
func (h *Handler) ServeWebSocket(w http.ResponseWriter, r *http.Request, authorize WSAuthorizer) {
	if !h.wsEnter() {
		writeHTTPError(w, http.StatusServiceUnavailable, &proto.Error{Code: dberr.CodeUnavailable, Message: "the server is shutting down; retry on another instance"})
		return
	}
	defer h.wsLeave()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: wsSubprotocols})
	if err != nil {
		h.log.Debug("hrana: WebSocket upgrade failed", "err", err)
		return // Accept has answered
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
		return
	}
	ws.SetReadLimit(h.cfg.MaxBodyBytes)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &wsConn{
		h: h, ws: ws, version: version, protobuf: protobuf, authorize: authorize,
		ctx: ctx, cancel: cancel, streams: map[int32]*wsStream{}, sqls: map[int32]string{},
		cursors: map[int32]int32{}, inflight: make(chan struct{}, wsMaxInflight),
		started: time.Now(), lastActive: time.Now(),
	}
	if !h.wsTrack(c) {
		_ = ws.Close(websocket.StatusGoingAway, "the server is shutting down")
		return
	}
	defer h.wsUntrack(c)
	c.serve()
}

// wsConn is one WebSocket connection. Fields below mu are shared with the
// janitor and the stream workers; the others belong to the reading goroutine.
type wsConn struct {
	h         *Handler
	ws        *websocket.Conn
	version   int
	protobuf  bool
	authorize WSAuthorizer
	ctx       context.Context // ends with the connection: stops work in flight
	cancel    context.CancelFunc

	grant   *WSGrant
	streams map[int32]*wsStream
	sqls    map[int32]string // stored SQL texts; replaced, never changed, so requests keep the one they saw
	cursors map[int32]int32  // cursor id -> stream id

	inflight chan struct{} // a slot per request read and not yet answered
	workers  sync.WaitGroup

	mu         sync.Mutex
	live       map[*wsStream]struct{} // streams with a worker
	started    time.Time
	lastActive time.Time
	busy       int // requests in flight
	expires    time.Time
	helloDone  bool
	closing    bool
	closeDone  chan struct{} // closed once the closing handshake is over
}

// wsStream is one stream of a connection and the worker that runs its
// requests in order.
type wsStream struct {
	id   int32
	jobs chan func()

	mu      sync.Mutex   // held while a request runs; the janitor skips a busy stream
	s       *stream      // nil until open_stream succeeded
	openErr *proto.Error // why open_stream failed
	cursor  *wsCursor
}

// wsCursor is a cursor's entries, computed when it opened.
type wsCursor struct {
	id      int32
	entries []proto.CursorEntry
	err     *proto.Error
}

// wsProtocolError ends the connection: the client broke the protocol.
type wsProtocolError struct{ msg string }

func (e *wsProtocolError) Error() string { return e.msg }

func protocolErrorf(format string, args ...any) error {
	return &wsProtocolError{msg: fmt.Sprintf(format, args...)}
}

func (c *wsConn) serve() {
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		c.janitor()
	}()
	defer func() {
		c.cancel()
		<-janitorDone
		c.teardown()
	}()
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			// A closed connection, or a message over the read limit (the
			// library closes with "message too big" itself).
			c.h.log.Debug("hrana: WebSocket connection ended", "err", err)
			return
		}
		c.touch(0)
		if perr := c.handleMessage(typ, data); perr != nil {
			var pe *wsProtocolError
			if errors.As(perr, &pe) {
				c.closeWith(websocket.StatusProtocolError, truncate(pe.msg, 120))
			} else {
				c.closeWith(websocket.StatusPolicyViolation, truncate(perr.Error(), 120))
			}
			return
		}
	}
}

// truncate keeps a close reason within the 123 bytes a close frame allows.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// closeWith starts the closing handshake; the reading goroutine then ends.
func (c *wsConn) closeWith(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.closeDone = make(chan struct{})
	c.mu.Unlock()
	go func() {
		defer close(c.closeDone)
		_ = c.ws.Close(code, reason)
	}()
}

// touch records activity; delta counts requests starting (+1) or answered (-1).
func (c *wsConn) touch(delta int) {
	c.mu.Lock()
	c.lastActive = time.Now()
	c.busy += delta
	c.mu.Unlock()
}

func (c *wsConn) handleMessage(typ websocket.MessageType, data []byte) error {
	var (
		msg *proto.ClientMsg
		err error
	)
	switch {
	case c.protobuf && typ == websocket.MessageBinary:
		msg, err = proto.DecodeClientMsgProtobuf(data)
	case !c.protobuf && typ == websocket.MessageText:
		msg, err = proto.DecodeClientMsgJSON(data)
	case c.protobuf:
		return protocolErrorf("hrana3-protobuf takes binary messages only")
	default:
		return protocolErrorf("%s takes text messages only", c.ws.Subprotocol())
	}
	if err != nil {
		return protocolErrorf("%v", err)
	}
	switch msg.Type {
	case "hello":
		return c.hello(msg)
	case "request":
		if c.grant == nil {
			return protocolErrorf("a request came before the hello")
		}
		if msg.RequestID == nil || msg.Request == nil {
			return protocolErrorf("a request message needs request_id and request")
		}
		return c.request(*msg.RequestID, msg.Request)
	}
	return protocolErrorf("unknown message type %q (want hello or request)", msg.Type)
}

func (c *wsConn) hello(msg *proto.ClientMsg) error {
	if c.grant != nil && c.version < 2 {
		return protocolErrorf("hrana1 allows one hello per connection")
	}
	jwt := ""
	if msg.JWT != nil {
		jwt = *msg.JWT
	}
	grant, e := c.authorize(c.ctx, jwt)
	if e == nil && c.grant != nil && grant.Owner != c.grant.Owner {
		e = &proto.Error{Code: dberr.CodeUnauthorized, Message: "a new hello must authenticate the identity the connection started with; open another connection for other credentials"}
	}
	if e != nil {
		c.send(&proto.ServerMsg{Type: "hello_error", Error: e})
		return errors.New("authentication failed")
	}
	if c.grant == nil {
		c.grant = grant
	}
	c.mu.Lock()
	c.helloDone, c.expires = true, grant.Expires
	c.mu.Unlock()
	c.send(&proto.ServerMsg{Type: "hello_ok"})
	return nil
}

// request dispatches one request. Answers go out when the request is done,
// in whatever order; requests on one stream run in order.
func (c *wsConn) request(id int32, req *proto.WSRequest) error {
	minVersion, known := proto.WSMinVersion[req.Type]
	if !known {
		return protocolErrorf("unknown request type %q", req.Type)
	}
	if c.version < minVersion {
		return protocolErrorf("%s needs Hrana %d; the connection speaks %s", req.Type, minVersion, c.ws.Subprotocol())
	}
	if c.version < 2 && req.Stmt != nil && req.Stmt.SQLID != nil {
		return protocolErrorf("sql_id needs Hrana 2; the connection speaks hrana1")
	}
	select { // back-pressure: stop reading while too many requests are in flight
	case c.inflight <- struct{}{}:
	case <-c.ctx.Done():
		return nil
	}
	c.touch(1)
	answered := false
	reply := func(resp any, e *proto.Error) {
		if answered {
			return
		}
		answered = true
		if e != nil {
			c.send(&proto.ServerMsg{Type: "response_error", RequestID: &id, Error: e})
		} else {
			c.send(&proto.ServerMsg{Type: "response_ok", RequestID: &id, Response: resp})
		}
		c.touch(-1)
		<-c.inflight
	}
	err := c.dispatch(req, reply)
	if err != nil {
		reply(nil, &proto.Error{Code: dberr.CodeProtocolError, Message: err.Error()})
	}
	return err
}

func (c *wsConn) dispatch(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	simple := map[string]string{"type": req.Type}
	switch req.Type {
	case "open_stream":
		return c.openStream(req, reply)
	case "close_stream":
		return c.closeStream(req, reply)
	case "store_sql":
		if req.SQLID == nil || req.SQL == nil {
			return protocolErrorf("store_sql needs sql_id and sql")
		}
		if _, used := c.sqls[*req.SQLID]; used {
			return protocolErrorf("SQL text id %d is already in use; close_sql it first", *req.SQLID)
		}
		if len(c.sqls) >= maxStoredSQL {
			reply(nil, &proto.Error{Code: dberr.CodeSQLStoreFull, Message: fmt.Sprintf("a connection may store at most %d SQL texts; close_sql some first", maxStoredSQL)})
			return nil
		}
		sqls := maps.Clone(c.sqls)
		sqls[*req.SQLID] = *req.SQL
		c.sqls = sqls
		reply(simple, nil)
		return nil
	case "close_sql":
		if req.SQLID == nil {
			return protocolErrorf("close_sql needs sql_id")
		}
		if _, used := c.sqls[*req.SQLID]; used {
			sqls := maps.Clone(c.sqls)
			delete(sqls, *req.SQLID)
			c.sqls = sqls
		}
		reply(simple, nil)
		return nil
	case "open_cursor":
		return c.openCursor(req, reply)
	case "fetch_cursor", "close_cursor":
		return c.cursorRequest(req, reply)
	}
	// execute, batch, sequence, describe, get_autocommit: the executor's.
	st, err := c.stream(req.StreamID)
	if err != nil {
		return err
	}
	if e := validateRequest(&req.StreamRequest); e != nil {
		return protocolErrorf("%s", e.Message)
	}
	sqls := c.sqls
	c.enqueue(st, func() {
		s, e := st.ready()
		if e != nil {
			reply(nil, e)
			return
		}
		s.sqls = sqls
		x, cancel := c.h.newExecution(c.ctx, s)
		res := x.handle(&req.StreamRequest)
		cancel()
		if res.Type == "error" {
			reply(nil, res.Error)
		} else {
			reply(res.Response, nil)
		}
	})
	return nil
}

// stream returns the stream a request names; naming one that is not open
// is a protocol error.
func (c *wsConn) stream(id *int32) (*wsStream, error) {
	if id == nil {
		return nil, protocolErrorf("the request needs a stream_id")
	}
	st, ok := c.streams[*id]
	if !ok {
		return nil, protocolErrorf("stream %d is not open", *id)
	}
	return st, nil
}

// ready returns the stream's state for a request, or why it cannot run.
// Called by the stream's worker.
func (st *wsStream) ready() (*stream, *proto.Error) {
	if st.s == nil {
		e := *st.openErr
		e.Message = fmt.Sprintf("stream %d failed to open: %s", st.id, e.Message)
		return nil, &e
	}
	return st.s, nil
}

// enqueue runs job on st's worker, after the requests queued before it.
func (c *wsConn) enqueue(st *wsStream, job func()) {
	select {
	case st.jobs <- func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		job()
	}:
	case <-c.ctx.Done():
	}
}

func (c *wsConn) openStream(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	if req.StreamID == nil {
		return protocolErrorf("open_stream needs a stream_id")
	}
	id := *req.StreamID
	if _, used := c.streams[id]; used {
		return protocolErrorf("stream %d is already open", id)
	}
	limit := c.h.cfg.MaxStreamsPerConnection
	if len(c.streams) >= 2*limit {
		return errors.New("too many streams left open on one connection, even after failing to open them: close them")
	}
	st := &wsStream{id: id}
	c.streams[id] = st
	if len(c.live) >= limit {
		st.openErr = &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf("a connection may have %d streams open at once; close some first", limit)}
		reply(nil, st.openErr)
		return nil
	}
	st.jobs = make(chan func(), wsStreamQueue)
	c.mu.Lock()
	if c.live == nil {
		c.live = map[*wsStream]struct{}{}
	}
	c.live[st] = struct{}{}
	c.mu.Unlock()
	c.workers.Add(1)
	go func() {
		defer c.workers.Done()
		for job := range st.jobs {
			if c.ctx.Err() == nil {
				job()
			}
		}
	}()
	open := c.grant.Open
	owner := c.grant.Owner
	c.enqueue(st, func() {
		db, err := open(c.ctx)
		if err != nil {
			st.openErr = toError(err, "")
			reply(nil, st.openErr)
			return
		}
		s, e := c.h.newStream(db, owner)
		if e == nil {
			c.h.mu.Lock()
			e = c.h.reserve(s)
			c.h.mu.Unlock()
		}
		if e != nil {
			st.openErr = e
			reply(nil, e)
			return
		}
		st.s = s
		reply(map[string]string{"type": "open_stream"}, nil)
	})
	return nil
}

func (c *wsConn) closeStream(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	st, err := c.stream(req.StreamID)
	if err != nil {
		return err
	}
	delete(c.streams, st.id)
	for cid, sid := range c.cursors {
		if sid == st.id {
			delete(c.cursors, cid)
		}
	}
	done := map[string]string{"type": "close_stream"}
	if st.jobs == nil { // never had a worker
		reply(done, nil)
		return nil
	}
	c.enqueue(st, func() {
		c.endStream(st)
		reply(done, nil)
	})
	close(st.jobs)
	return nil
}

// endStream rolls back what the stream holds and returns its quota slot.
// Called by the stream's worker, or by teardown after the workers ended.
func (c *wsConn) endStream(st *wsStream) {
	c.mu.Lock()
	delete(c.live, st)
	c.mu.Unlock()
	st.cursor = nil
	s := st.s
	if s == nil {
		return
	}
	st.s = nil
	st.openErr = &proto.Error{Code: dberr.CodeStreamClosed, Message: "the stream is closed"}
	if s.sess != nil {
		c.h.closeSession(s.sess, "stream closed")
		s.sess = nil
	}
	c.h.mu.Lock()
	c.h.forget(s)
	c.h.mu.Unlock()
}

func (c *wsConn) openCursor(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	st, err := c.stream(req.StreamID)
	if err != nil {
		return err
	}
	if req.CursorID == nil || req.Batch == nil {
		return protocolErrorf("open_cursor needs cursor_id and batch")
	}
	cid := *req.CursorID
	if _, used := c.cursors[cid]; used {
		return protocolErrorf("cursor %d is already open", cid)
	}
	for _, sid := range c.cursors {
		if sid == st.id {
			return protocolErrorf("stream %d already has an open cursor; close it first", st.id)
		}
	}
	if e := validateBatch(req.Batch); e != nil {
		return protocolErrorf("%s", e.Message)
	}
	c.cursors[cid] = st.id
	if st.jobs == nil {
		_, e := st.ready()
		reply(nil, e)
		return nil
	}
	sqls := c.sqls
	c.enqueue(st, func() {
		s, e := st.ready()
		if e != nil {
			st.cursor = &wsCursor{id: cid, err: e}
			reply(nil, e)
			return
		}
		s.sqls = sqls
		x, cancel := c.h.newExecution(c.ctx, s)
		var (
			res    *proto.BatchResult
			failed *proto.Error
		)
		if s.dead != nil {
			failed = s.dead
		} else {
			res, failed = x.batch(req.Batch)
		}
		cancel()
		st.cursor = &wsCursor{id: cid, entries: proto.CursorEntries(res, failed)}
		reply(map[string]string{"type": "open_cursor"}, nil)
	})
	return nil
}

func (c *wsConn) cursorRequest(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	if req.CursorID == nil {
		return protocolErrorf("%s needs a cursor_id", req.Type)
	}
	cid := *req.CursorID
	sid, ok := c.cursors[cid]
	if !ok {
		return protocolErrorf("cursor %d is not open", cid)
	}
	st := c.streams[sid]
	if req.Type == "close_cursor" {
		delete(c.cursors, cid)
	}
	if st.jobs == nil {
		if req.Type == "close_cursor" {
			reply(map[string]string{"type": "close_cursor"}, nil)
		} else {
			_, e := st.ready()
			reply(nil, e)
		}
		return nil
	}
	maxCount := 0
	if req.MaxCount != nil {
		maxCount = int(min(*req.MaxCount, wsMaxCursorFetch))
	}
	c.enqueue(st, func() {
		cur := st.cursor
		if cur == nil || cur.id != cid {
			if req.Type == "close_cursor" {
				reply(map[string]string{"type": "close_cursor"}, nil)
			} else {
				reply(nil, &proto.Error{Code: "CURSOR_CLOSED", Message: fmt.Sprintf("cursor %d is closed", cid)})
			}
			return
		}
		if req.Type == "close_cursor" {
			st.cursor = nil
			reply(map[string]string{"type": "close_cursor"}, nil)
			return
		}
		if cur.err != nil {
			reply(nil, cur.err)
			return
		}
		n := min(maxCount, len(cur.entries))
		resp := proto.FetchCursorResp{Type: "fetch_cursor", Entries: cur.entries[:n:n]}
		cur.entries = cur.entries[n:]
		resp.Done = len(cur.entries) == 0
		if resp.Entries == nil {
			resp.Entries = []proto.CursorEntry{}
		}
		reply(resp, nil)
	})
	return nil
}

// send writes one message; a failed write ends the connection.
func (c *wsConn) send(msg *proto.ServerMsg) {
	data, err := proto.EncodeServerMsg(msg, c.protobuf)
	if err != nil {
		c.h.log.Error("hrana: encoding a WebSocket message failed", "err", err)
		data, _ = proto.EncodeServerMsg(&proto.ServerMsg{Type: "response_error", RequestID: msg.RequestID,
			Error: &proto.Error{Code: dberr.CodeInternalError, Message: "the request ran but its response could not be encoded: " + err.Error()}}, c.protobuf)
	}
	typ := websocket.MessageText
	if c.protobuf {
		typ = websocket.MessageBinary
	}
	ctx, cancel := context.WithTimeout(c.ctx, wsWriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, typ, data); err != nil {
		c.cancel()
	}
}

// janitor closes the connection when it idles, when no hello came, or when
// its credential expired, and rolls back transactions past TxTimeout.
func (c *wsConn) janitor() {
	h := c.h
	tick := max(min(h.cfg.TxTimeout, h.cfg.WebSocketIdleTimeout, time.Second)/10, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			idle := c.busy == 0 && now.Sub(c.lastActive) > h.cfg.WebSocketIdleTimeout
			noHello := !c.helloDone && now.Sub(c.started) > wsHelloTimeout
			expired := !c.expires.IsZero() && now.After(c.expires)
			live := make([]*wsStream, 0, len(c.live))
			for st := range c.live {
				live = append(live, st)
			}
			c.mu.Unlock()
			switch {
			case noHello:
				c.closeWith(websocket.StatusPolicyViolation, "no hello within "+wsHelloTimeout.String())
			case expired:
				c.closeWith(websocket.StatusPolicyViolation, "the credential expired: reconnect, or send a hello with a fresh JWT before it expires")
			case idle:
				c.closeWith(websocket.StatusGoingAway, "idle for "+h.cfg.WebSocketIdleTimeout.String())
			}
			for _, st := range live {
				c.expireTx(st, now)
			}
		}
	}
}

// expireTx rolls back st's transaction once it is open longer than
// TxTimeout, since it holds the database's writer; the stream then answers
// every request with the timeout until it is closed.
func (c *wsConn) expireTx(st *wsStream, now time.Time) {
	if !st.mu.TryLock() {
		return // a request is running: its own deadline covers it
	}
	defer st.mu.Unlock()
	s := st.s
	if s == nil || s.sess == nil || now.Sub(s.txStart) <= c.h.cfg.TxTimeout {
		return
	}
	sess := s.sess
	s.sess, s.readOnlyTx = nil, false
	s.dead = &proto.Error{Code: dberr.CodeTransactionTimeout, Message: fmt.Sprintf(
		"the transaction on database %q was open for more than %s and was rolled back; keep interactive transactions short or raise the transaction timeout",
		s.db.Name(), c.h.cfg.TxTimeout)}
	c.h.log.Info("hrana: rolled back an abandoned transaction", "db", s.db.Name(), "reason", "transaction timeout")
	c.h.closeSession(sess, "transaction timeout")
}

// teardown ends every stream once the connection is gone: queued requests
// are dropped, transactions rolled back, quota slots returned.
func (c *wsConn) teardown() {
	for _, st := range c.streams {
		if st.jobs != nil {
			close(st.jobs)
		}
	}
	c.workers.Wait()
	c.mu.Lock()
	live := make([]*wsStream, 0, len(c.live))
	for st := range c.live {
		live = append(live, st)
	}
	c.mu.Unlock()
	for _, st := range live {
		c.endStream(st)
	}
	c.mu.Lock()
	closeDone := c.closeDone
	c.mu.Unlock()
	if closeDone != nil {
		<-closeDone // the client hears why before the connection drops
	}
	_ = c.ws.CloseNow()
}

// wsEnter counts a connection being set up, refusing once the handler closes.
func (h *Handler) wsEnter() bool {
	h.wsMu.Lock()
	defer h.wsMu.Unlock()
	if h.wsClosed {
		return false
	}
	h.wsActive.Add(1)
	return true
}

func (h *Handler) wsLeave() { h.wsActive.Done() }

func (h *Handler) wsTrack(c *wsConn) bool {
	h.wsMu.Lock()
	defer h.wsMu.Unlock()
	if h.wsClosed {
		return false
	}
	if h.wsConns == nil {
		h.wsConns = map[*wsConn]struct{}{}
	}
	h.wsConns[c] = struct{}{}
	return true
}

func (h *Handler) wsUntrack(c *wsConn) {
	h.wsMu.Lock()
	delete(h.wsConns, c)
	h.wsMu.Unlock()
}

// CloseWebSockets closes every WebSocket connection ("going away"), rolls
// back their open transactions and refuses new ones. It returns when they
// are gone or ctx ends.
func (h *Handler) CloseWebSockets(ctx context.Context) {
	h.wsMu.Lock()
	h.wsClosed = true
	for c := range h.wsConns {
		c.closeWith(websocket.StatusGoingAway, "the server is shutting down")
		// Stop what runs: a request in flight is answered as canceled and
		// its transaction rolled back, as when a client disconnects.
		time.AfterFunc(2*time.Second, c.cancel)
	}
	h.wsMu.Unlock()
	done := make(chan struct{})
	go func() {
		h.wsActive.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
