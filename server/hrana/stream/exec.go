package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// step is one compiled statement of a batch (execute and sequence requests
// are batches too).
type step struct {
	sql      string
	class    sqltext.TxRole
	stmt     sqlconn.Stmt
	cond     *proto.BatchCond
	compile  *proto.Error // e.g. an unknown sql_id: reported as the step's error
	hasNamed bool         // has a named argument without its prefix
}

// outcome is a batch's per-step results; a skipped step has neither.
type outcome struct {
	results []*proto.StmtResult
	errs    []*proto.Error
}

// Execution runs the requests of one request (HTTP, or WebSocket) on one stream.
type Execution struct {
	r        *Registry
	s        *Stream
	ctx      context.Context // the request's, bounded by RequestTimeout
	parent   context.Context // the request's, unbounded (tells a client's cancel from our deadline)
	bookmark dbhost.Bookmark // highest bookmark any statement reflected
	// StreamRows encodes rows as JSON as SQLite steps them
	// (StmtResult.RowsJSON), for an answer that hrana's writePipeline writes;
	// otherwise they are kept in Rows (protobuf, WebSocket and cursor
	// answers encode them from there).
	StreamRows bool
	// RowLines, with StreamRows, encodes each row as a JSON cursor's row
	// entry (a line of its own) instead.
	RowLines bool
	// budget caps the answer (nil: no cap); mark is where it stood when
	// the batch running now began (it is rewound when the batch runs again).
	budget *proto.Budget
	mark   int
	// needsWriter is set when the database, a read replica (hrana.ServeRead),
	// refused a write or a session: the request is not answered here.
	needsWriter error
}

// noteNeedsWriter records err if it says that the request needs the
// database's writer (followers.NeedsWriterError, from a read replica).
func (x *Execution) noteNeedsWriter(err error) {
	if x.needsWriter == nil && followers.IsNeedsWriter(err) {
		x.needsWriter = err
	}
}

// NewExecution bounds the request's total run time; call the returned
// cancel when the request is answered.
func (r *Registry) NewExecution(ctx context.Context, s *Stream) (*Execution, context.CancelFunc) {
	bounded, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	return &Execution{r: r, s: s, ctx: bounded, parent: ctx, budget: proto.NewBudget(r.cfg.MaxResponseBytes)}, cancel
}

// Budget is the request's answer budget (nil when answers are not capped):
// a transport whose encoding is not JSON sets its Measure and RowOverhead
// before the first request runs.
func (x *Execution) Budget() *proto.Budget { return x.budget }

// waitCtx is the context for waiting on the writer and on an upload: the
// caller's, not the request's time limit. A group that ran the request may
// commit and become durable after the limit, and answering that as a timeout
// would invite a retry that writes it twice. The limit bounds the statements,
// and so how long the request holds the writer.
func (x *Execution) waitCtx() context.Context {
	if x.parent != nil {
		return x.parent
	}
	return x.ctx
}

// errRequestTimedOut makes a write group roll back the request that ran
// past its deadline (its statements' own errors would not).
var errRequestTimedOut = errors.New("hrana: request timeout")

// timedOut reports the request's deadline as a Hrana error, or nil while it
// has time left (or when the client, not the deadline, ended it).
func (x *Execution) timedOut() *proto.Error {
	if x.ctx.Err() == nil || (x.parent != nil && x.parent.Err() != nil) {
		return nil
	}
	return &proto.Error{Code: dberr.CodeRequestTimeout, Message: fmt.Sprintf(
		"the request on database %q ran for more than %s (the request timeout) and was interrupted; what it ran was rolled back: split the work into smaller requests",
		x.s.db.Name(), x.r.cfg.RequestTimeout)}
}

var (
	errTxLeftOpen = errors.New("hrana: batch leaves a transaction open")
)

// virtualSavepoint stands in for BEGIN...COMMIT when a whole transaction runs
// inside one read or write group.
const virtualSavepoint = "hrana_tx"

func (x *Execution) compileStmt(st *proto.Stmt, cond *proto.BatchCond, defaultWantRows bool) step {
	var out step
	out.cond = cond
	sql, e := x.resolveSQL(st.SQL, st.SQLID)
	if e != nil {
		out.compile = e
		return out
	}
	if sql, out.compile = SingleStatement(sql); out.compile != nil {
		return out
	}
	out.sql = sql
	out.class = sqltext.Classify(sql)
	want := defaultWantRows
	if st.WantRows != nil {
		want = *st.WantRows
	}
	out.stmt = sqlconn.Stmt{SQL: sql, WantRows: want, StrictArgs: true}
	for _, a := range st.Args {
		out.stmt.Args = append(out.stmt.Args, sqlconn.Value(a))
	}
	if len(st.NamedArgs) > 0 {
		out.stmt.NamedArgs = make(map[string]sqlconn.Value, len(st.NamedArgs))
		for _, a := range st.NamedArgs {
			if a.Name == "" {
				out.compile = &proto.Error{Code: dberr.CodeArgsInvalid, Message: "a named argument has an empty name"}
				return out
			}
			if !strings.ContainsRune(":@$?", rune(a.Name[0])) {
				out.hasNamed = true
			}
			out.stmt.NamedArgs[a.Name] = sqlconn.Value(a.Value)
		}
	}
	return out
}

func (x *Execution) resolveSQL(sql *string, id *int32) (string, *proto.Error) {
	switch {
	case sql != nil && id != nil:
		return "", &proto.Error{Code: "SQL_AND_SQL_ID", Message: "a statement gives both sql and sql_id; give exactly one"}
	case sql != nil:
		return *sql, nil
	case id != nil:
		text, ok := x.s.sqls[*id]
		if !ok {
			return "", &proto.Error{Code: "SQL_ID_NOT_FOUND", Message: fmt.Sprintf("SQL text %d is not stored on this stream; send store_sql first", *id)}
		}
		return text, nil
	}
	return "", &proto.Error{Code: "SQL_MISSING", Message: "a statement gives neither sql nor sql_id"}
}

// runSteps runs a batch on the stream: on its session when it holds one;
// otherwise in a read or write group, where a transaction that begins and
// ends inside the batch becomes a savepoint; otherwise on a new session. A
// batch that changes the connection itself (a connection-state pragma, a
// TEMP object) is refused on the shared connections of the groups before
// anything of it is kept, and runs on a new session instead.
func (x *Execution) runSteps(steps []step) (outcome, *proto.Error) {
	x.mark = x.budget.Used()
	if x.s.sess != nil {
		return x.onSession(steps)
	}
	txControl, virtualOK, endsTx := false, true, false
	for _, st := range steps {
		if !st.class.IsTxControl() {
			continue
		}
		txControl = true
		switch {
		case st.class.Kind == sqltext.Savepoint, st.class.ReadOnlyBegin:
			virtualOK = false
		case st.class.Kind == sqltext.Commit || st.class.Kind == sqltext.Rollback:
			endsTx = true
		}
	}
	if !txControl || (virtualOK && endsTx) {
		out, err := x.onPool(steps, txControl)
		if err != errTxLeftOpenErr && err != errOwnConnection {
			return out, err
		}
	}
	if e := x.openSession(); e != nil {
		return outcome{}, e
	}
	return x.onSession(steps)
}

// errTxLeftOpenErr marks a virtual transaction that the batch did not end; the
// batch is then run again on a real session (nothing of it was committed).
var errTxLeftOpenErr = &proto.Error{Code: "TX_LEFT_OPEN"}

// errOwnConnection marks a batch that needs a connection of its own; it is
// run again on a session (nothing of it was kept).
var errOwnConnection = &proto.Error{Code: dberr.CodeNeedsOwnConnection}

func (x *Execution) onPool(steps []step, virtual bool) (outcome, *proto.Error) {
	var plain []string
	for _, st := range steps {
		if st.compile == nil && !st.class.IsTxControl() {
			plain = append(plain, st.sql)
		}
	}
	var out outcome
	keyOutcome(x.ctx, &out)
	bm, err := dbhost.RunAuto(x.waitCtx(), x.s.db, plain, func(c sqlconn.Conn, onReader bool) error {
		rc := &runConn{conn: c, pooled: true, onReader: onReader, virtual: virtual, stop: x.ctx, stream: x.StreamRows, lines: x.RowLines, budget: x.budget, mark: x.mark}
		out = rc.run(x.ctx, steps)
		if x.ctx.Err() != nil {
			if virtual && rc.virtualOpen {
				rc.abortVirtual(context.WithoutCancel(x.ctx))
			}
			return errRequestTimedOut
		}
		if rc.rerun != nil {
			if virtual && rc.virtualOpen {
				rc.abortVirtual(x.ctx)
			}
			return rc.rerun
		}
		if virtual && rc.virtualOpen {
			rc.abortVirtual(x.ctx)
			return errTxLeftOpen
		}
		return nil
	})
	switch {
	case errors.Is(err, errTxLeftOpen):
		return outcome{}, errTxLeftOpenErr
	case errors.Is(err, dberr.ErrNeedsOwnConnection):
		return outcome{}, errOwnConnection
	}
	if e := x.timedOut(); e != nil && errors.Is(err, errRequestTimedOut) {
		return outcome{}, e
	}
	if err != nil {
		x.noteNeedsWriter(err)
		return outcome{}, ToError(err, x.s.db.Name())
	}
	x.stamp(out, bm)
	return out, nil
}

func (x *Execution) openSession() *proto.Error {
	r, owner := x.r, x.s.owner
	r.mu.Lock()
	if owner != "" && r.sessions[owner] >= r.cfg.MaxSessionsPerToken {
		r.mu.Unlock()
		return &proto.Error{Code: "SESSION_LIMIT", Message: fmt.Sprintf(
			"this token already holds %d open interactive transactions (the limit per token); commit or roll back one of them, then retry", r.cfg.MaxSessionsPerToken)}
	}
	key, dbName := pinKey(x.ctx, owner), x.s.db.Name()
	if e := r.pin(key, dbName); e != nil {
		r.mu.Unlock()
		return e
	}
	r.sessions[owner]++
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(x.ctx, x.r.cfg.TxTimeout)
	defer cancel()
	sess, err := x.s.db.Session(ctx)
	if err != nil {
		r.releaseSessionSlot(owner, key, dbName)
		x.noteNeedsWriter(err)
		if ctx.Err() != nil && x.ctx.Err() == nil {
			return &proto.Error{Code: "SQLITE_BUSY", Message: fmt.Sprintf(
				"database %q: no transaction could start within %s because another transaction holds the writer; retry", x.s.db.Name(), x.r.cfg.TxTimeout)}
		}
		return ToError(err, x.s.db.Name())
	}
	x.s.sess, x.s.txStart, x.s.readOnlyTx = &countedSession{Session: sess, r: r, owner: owner, key: key, db: dbName}, time.Time{}, false
	return nil
}

// countedSession returns its owner's session slot when it is closed; every
// way a stream's session ends goes through Close.
type countedSession struct {
	dbhost.Session
	r       *Registry
	owner   string
	key, db string // what it counts against (pins.go)
	once    sync.Once
}

func (c *countedSession) Close(ctx context.Context) (dbhost.Bookmark, error) {
	bm, err := c.Session.Close(ctx)
	c.once.Do(func() { c.r.releaseSessionSlot(c.owner, c.key, c.db) })
	return bm, err
}

func (r *Registry) releaseSessionSlot(owner, key, db string) {
	r.mu.Lock()
	r.unpin(key, db)
	if r.sessions[owner]--; r.sessions[owner] <= 0 {
		delete(r.sessions, owner)
	}
	r.mu.Unlock()
}

// onSession runs steps on the stream's session. A transaction is bounded by
// the transaction deadline (from the request that opened it). Once the
// stream is back in autocommit the session ends, unless the stream changed
// its connection (pragmas, TEMP objects): then the stream keeps it, so that
// what it set holds for its later requests as on a connection of its own,
// until the stream closes. Commits are durable before they are answered
// (Session.Exec); Close adds the final bookmark.
func (x *Execution) onSession(steps []step) (outcome, *proto.Error) {
	s := x.s
	if !s.txStart.IsZero() && !time.Now().Before(s.txStart.Add(x.r.cfg.TxTimeout)) {
		x.EndSession()
		s.dead = &proto.Error{Code: dberr.CodeTransactionTimeout, Message: fmt.Sprintf(
			"the transaction on database %q was open for more than %s and was rolled back", s.db.Name(), x.r.cfg.TxTimeout)}
		return outcome{}, s.dead
	}
	if s.txStart.IsZero() {
		s.txStart = time.Now() // bounds a transaction this request opens
	}
	ctx, cancel := context.WithDeadline(x.ctx, s.txStart.Add(x.r.cfg.TxTimeout))
	rc := &runConn{conn: s.sess, readOnlyTx: s.readOnlyTx, endCtx: x.ctx, stop: x.ctx, stream: x.StreamRows, lines: x.RowLines, budget: x.budget, mark: x.mark}
	out := rc.run(ctx, steps)
	cancel()
	s.readOnlyTx = rc.readOnlyTx
	if rc.broken != nil {
		// The session's connection failed inside the SQLite layer and was
		// rolled back and closed: the stream cannot go on.
		x.EndSession()
		s.dead = rc.broken
		return out, nil
	}
	if e := x.timedOut(); e != nil && !s.sess.Autocommit() {
		// The transaction held the writer (or a session) past the request's
		// limit: roll it back whole rather than leave it half applied.
		x.EndSession()
		s.dead = e
		return outcome{}, e
	}
	if !s.sess.Autocommit() {
		return out, nil
	}
	s.txStart = time.Time{}
	if s.sess.StateChanged() {
		x.stamp(out, dbhost.CurrentBookmark(s.db))
		return out, nil
	}
	bm, err := s.sess.Close(x.waitCtx())
	s.sess, s.readOnlyTx = nil, false
	if err != nil {
		e := ToError(err, s.db.Name())
		e.Message = "the transaction was committed locally but could not be made durable: " + e.Message
		return outcome{}, e
	}
	x.stamp(out, bm)
	return out, nil
}

// EndSession rolls back and drops the stream's session.
func (x *Execution) EndSession() {
	if x.s.sess != nil {
		x.r.closeSession(x.s.sess, "stream closed")
		x.s.sess, x.s.txStart, x.s.readOnlyTx = nil, time.Time{}, false
	}
}

func (x *Execution) autocommit() bool { return x.s.sess == nil || x.s.sess.Autocommit() }

// stamp sets the replication index of every result to bm.
func (x *Execution) stamp(out outcome, bm dbhost.Bookmark) {
	if bm == 0 {
		return
	}
	x.bookmark = max(x.bookmark, bm)
	idx := strconv.FormatUint(uint64(bm), 10)
	for _, r := range out.results {
		if r != nil {
			r.ReplicationIndex = &idx
		}
	}
}
