package ws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/hranapb"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
)

// conn is one WebSocket connection. Fields below mu are shared with the
// janitor and the stream workers; the others belong to the reading goroutine.
type conn struct {
	srv       *Server
	ws        *websocket.Conn
	version   int
	protobuf  bool
	authorize Authorizer
	ctx       context.Context // ends with the connection: stops work in flight
	cancel    context.CancelFunc

	grant   *Grant
	streams map[int32]*connStream
	sqls    map[int32]string // stored SQL texts; replaced, never changed, so requests keep the one they saw
	cursors map[int32]int32  // cursor id -> stream id

	inflight chan struct{} // a slot per request read and not yet answered
	workers  sync.WaitGroup

	mu         sync.Mutex
	live       map[*connStream]struct{} // streams with a worker
	started    time.Time
	lastActive time.Time
	busy       int // requests in flight
	expires    time.Time
	helloDone  bool
	closing    bool
	closeDone  chan struct{} // closed once the closing handshake is over
}

// protocolError ends the connection: the client broke the protocol.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

func protocolErrorf(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

func (c *conn) serve() {
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		c.janitor()
	}()
	defer func() {
		// The close frame goes out before c.ctx ends: a write still running
		// under c.ctx when it is cancelled makes the library drop the
		// connection at once, and the client would see EOF, not why.
		c.awaitCloseHandshake()
		c.cancel()
		<-janitorDone
		c.teardown()
	}()
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			// A closed connection, or a message over the read limit (the
			// library closes with "message too big" itself).
			c.srv.log.Debug("hrana: WebSocket connection ended", "err", err)
			return
		}
		c.touch(0)
		if perr := c.handleMessage(typ, data); perr != nil {
			var pe *protocolError
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

// awaitCloseHandshake waits for the closing handshake closeWith started, if any.
func (c *conn) awaitCloseHandshake() {
	c.mu.Lock()
	done := c.closeDone
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}

// closeWith starts the closing handshake; the reading goroutine then ends.
func (c *conn) closeWith(code websocket.StatusCode, reason string) {
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
func (c *conn) touch(delta int) {
	c.mu.Lock()
	c.lastActive = time.Now()
	c.busy += delta
	c.mu.Unlock()
}

func (c *conn) handleMessage(typ websocket.MessageType, data []byte) error {
	var (
		msg *proto.ClientMsg
		err error
	)
	switch {
	case c.protobuf && typ == websocket.MessageBinary:
		msg, err = hranapb.DecodeClientMsg(data)
	case !c.protobuf && typ == websocket.MessageText:
		msg, err = proto.DecodeClientMsg(data)
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

func (c *conn) hello(msg *proto.ClientMsg) error {
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
func (c *conn) request(id int32, req *proto.WSRequest) error {
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

func (c *conn) dispatch(req *proto.WSRequest, reply func(any, *proto.Error)) error {
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
		if len(c.sqls) >= stream.MaxStoredSQL {
			reply(nil, &proto.Error{Code: dberr.CodeSQLStoreFull, Message: fmt.Sprintf("a connection may store at most %d SQL texts; close_sql some first", stream.MaxStoredSQL)})
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
	st, err := c.lookup(req.StreamID)
	if err != nil {
		return err
	}
	if e := req.StreamRequest.Validate(); e != nil {
		return protocolErrorf("%s", e.Message)
	}
	sqls := c.sqls
	c.enqueue(st, func() {
		s, e := st.ready()
		if e != nil {
			reply(nil, e)
			return
		}
		s.UseSQL(sqls)
		x, cancel := c.srv.streams.NewExecution(c.ctx, s)
		c.sizeRows(x)
		res := x.Handle(&req.StreamRequest)
		cancel()
		if res.Type == "error" {
			reply(nil, res.Error)
		} else {
			reply(res.Response, nil)
		}
	})
	return nil
}

// encode encodes msg in the connection's encoding.
func (c *conn) encode(msg *proto.ServerMsg) ([]byte, error) {
	if c.protobuf {
		return hranapb.EncodeServerMsg(msg)
	}
	return json.Marshal(msg)
}

// send writes one message; a failed write ends the connection.
func (c *conn) send(msg *proto.ServerMsg) {
	data, err := c.encode(msg)
	if err != nil {
		c.srv.log.Error("hrana: encoding a WebSocket message failed", "err", err)
		data, _ = c.encode(&proto.ServerMsg{Type: "response_error", RequestID: msg.RequestID,
			Error: &proto.Error{Code: dberr.CodeInternalError, Message: "the request ran but its response could not be encoded: " + err.Error()}})
	}
	typ := websocket.MessageText
	if c.protobuf {
		typ = websocket.MessageBinary
	}
	ctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, typ, data); err != nil {
		c.cancel()
	}
}

// sizeRows sizes the execution's rows for its answer budget in the
// connection's encoding (JSON unless protobuf).
func (c *conn) sizeRows(x *stream.Execution) {
	if b := x.Budget(); b != nil && c.protobuf {
		b.Measure, b.RowOverhead = hranapb.ValueSize, hranapb.RowOverhead
	}
}
