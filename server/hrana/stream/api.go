package stream

import (
	"fmt"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// Refusal says why Acquire refused a baton, for the transport to answer it.
type Refusal int

const (
	// RefusedBaton: the baton is invalid, expired or reused, or the server
	// ended its stream; the client starts a new stream.
	RefusedBaton Refusal = iota + 1
	// RefusedForbidden: the baton names a stream another owner opened.
	RefusedForbidden
	// RefusedQuota: a stream quota is full.
	RefusedQuota
	// RefusedInternal: the stream could not be created.
	RefusedInternal
)

// OneShot returns an unregistered stream for one request; the caller ends
// any session it leaves open (Execution.EndSession).
func OneShot(db dbhost.Database, owner string) *Stream {
	return &Stream{db: db, owner: owner, busy: true}
}

// Drop ends a stream acquired for a request that another instance (the
// writer) runs instead: nothing of it stays here.
func (r *Registry) Drop(s *Stream) {
	s.closed = true
	r.Release(s)
}

// Abandon ends a stream whose request failed unexpectedly (a panic): e is
// told to whoever continues it, its transaction is rolled back.
func (r *Registry) Abandon(s *Stream, e *proto.Error) {
	s.dead = e
	r.Release(s)
}

// Open returns a new stream that its caller keeps (a WebSocket stream, not
// addressed by batons) once it took its slots of the stream quotas.
func (r *Registry) Open(db dbhost.Database, owner string) (*Stream, *proto.Error) {
	s, e := r.newStream(db, owner)
	if e != nil {
		return nil, e
	}
	r.mu.Lock()
	e = r.reserve(s)
	r.mu.Unlock()
	if e != nil {
		return nil, e
	}
	return s, nil
}

// End rolls back what a stream from Open holds and returns its quota slots.
func (r *Registry) End(s *Stream) {
	if s.sess != nil {
		r.closeSession(s.sess, "stream closed")
		s.sess = nil
	}
	r.mu.Lock()
	r.forget(s)
	r.mu.Unlock()
}

// ExpireTx rolls back the transaction of a stream from Open once it is open
// longer than TxTimeout, since it holds the database's writer; the stream
// then answers every request with the timeout. A session kept only for the
// connection's state (a pragma, a TEMP table) in autocommit holds no
// transaction and never expires here: like any stream it ends when idle.
// The caller makes sure no request runs on s meanwhile.
func (r *Registry) ExpireTx(s *Stream, now time.Time) {
	if s.sess == nil || s.txStart.IsZero() || now.Sub(s.txStart) <= r.cfg.TxTimeout {
		return
	}
	sess := s.sess
	s.sess, s.readOnlyTx = nil, false
	s.dead = &proto.Error{Code: dberr.CodeTransactionTimeout, Message: fmt.Sprintf(
		"the transaction on database %q was open for more than %s and was rolled back; keep interactive transactions short or raise the transaction timeout",
		s.db.Name(), r.cfg.TxTimeout)}
	r.log.Info("hrana: rolled back an abandoned transaction", "db", s.db.Name(), "reason", "transaction timeout")
	r.closeSession(sess, "transaction timeout")
}

// UseSQL makes sqls the SQL texts the stream's requests refer to by id (a
// WebSocket connection stores them for all its streams).
func (s *Stream) UseSQL(sqls map[int32]string) { s.sqls = sqls }

// Stream is the stream the execution runs on.
func (x *Execution) Stream() *Stream { return x.s }

// NeedsWriter is the *followers.NeedsWriterError the database (a read
// replica) answered, when the request must be sent to the writer instead.
func (x *Execution) NeedsWriter() error { return x.needsWriter }

// Bookmark is the highest bookmark any statement of the request reflected.
func (x *Execution) Bookmark() dbhost.Bookmark { return x.bookmark }

// Execute runs one statement (a Hrana 1 execute request).
func (x *Execution) Execute(st *proto.Stmt) (*proto.StmtResult, *proto.Error) {
	out, e := x.runSteps([]step{x.compileStmt(st, nil, true)})
	if e != nil {
		return nil, e
	}
	return out.results[0], out.errs[0]
}

// Cursor runs a cursor's batch and returns its entries; a stream the server
// ended yields its error as the one entry.
func (x *Execution) Cursor(b *proto.Batch) []proto.CursorEntry {
	return proto.CursorEntries(x.CursorBatch(b))
}

// CursorBatch runs a cursor's batch, for proto.EachCursorEntry; a stream
// the server ended yields its error as failed.
func (x *Execution) CursorBatch(b *proto.Batch) (res *proto.BatchResult, failed *proto.Error) {
	if x.s.dead != nil {
		return nil, x.s.dead
	}
	return x.Batch(b)
}
