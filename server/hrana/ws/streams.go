package ws

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
)

// connStream is one stream of a connection and the worker that runs its
// requests in order.
type connStream struct {
	id   int32
	jobs chan func()

	mu      sync.Mutex     // held while a request runs; the janitor skips a busy stream
	s       *stream.Stream // nil until open_stream succeeded
	openErr *proto.Error   // why open_stream failed
	cursor  *cursor
}

// cursor is a cursor's entries, computed when it opened.
type cursor struct {
	id      int32
	entries []proto.CursorEntry
	err     *proto.Error
}

// lookup returns the stream a request names; naming one that is not open
// is a protocol error.
func (c *conn) lookup(id *int32) (*connStream, error) {
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
func (st *connStream) ready() (*stream.Stream, *proto.Error) {
	if st.s == nil {
		e := *st.openErr
		e.Message = fmt.Sprintf("stream %d failed to open: %s", st.id, e.Message)
		return nil, &e
	}
	return st.s, nil
}

// enqueue runs job on st's worker, after the requests queued before it.
func (c *conn) enqueue(st *connStream, job func()) {
	select {
	case st.jobs <- func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		job()
	}:
	case <-c.ctx.Done():
	}
}

func (c *conn) openStream(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	if req.StreamID == nil {
		return protocolErrorf("open_stream needs a stream_id")
	}
	id := *req.StreamID
	if _, used := c.streams[id]; used {
		return protocolErrorf("stream %d is already open", id)
	}
	limit := c.srv.cfg.MaxStreamsPerConnection
	if len(c.streams) >= 2*limit {
		return errors.New("too many streams left open on one connection, even after failing to open them: close them")
	}
	st := &connStream{id: id}
	c.streams[id] = st
	// live shrinks on the stream workers (endStream): count it under c.mu.
	c.mu.Lock()
	full := len(c.live) >= limit
	if !full {
		if c.live == nil {
			c.live = map[*connStream]struct{}{}
		}
		c.live[st] = struct{}{}
	}
	c.mu.Unlock()
	if full {
		st.openErr = &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf("a connection may have %d streams open at once; close some first", limit)}
		reply(nil, st.openErr)
		return nil
	}
	st.jobs = make(chan func(), streamQueue)
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
			st.openErr = stream.ToError(err, "")
			reply(nil, st.openErr)
			return
		}
		s, e := c.srv.streams.Open(db, owner)
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

func (c *conn) closeStream(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	st, err := c.lookup(req.StreamID)
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
func (c *conn) endStream(st *connStream) {
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
	c.srv.streams.End(s)
}

func (c *conn) openCursor(req *proto.WSRequest, reply func(any, *proto.Error)) error {
	st, err := c.lookup(req.StreamID)
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
	if e := req.Batch.Validate(); e != nil {
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
			st.cursor = &cursor{id: cid, err: e}
			reply(nil, e)
			return
		}
		s.UseSQL(sqls)
		x, cancel := c.srv.streams.NewExecution(c.ctx, s)
		c.sizeRows(x)
		entries := x.Cursor(req.Batch)
		cancel()
		st.cursor = &cursor{id: cid, entries: entries}
		reply(map[string]string{"type": "open_cursor"}, nil)
	})
	return nil
}

func (c *conn) cursorRequest(req *proto.WSRequest, reply func(any, *proto.Error)) error {
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
		maxCount = int(min(*req.MaxCount, maxCursorFetch))
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
