package hrana

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/server/dbhost"
)

// step is one compiled statement of a batch (execute and sequence requests
// are batches too).
type step struct {
	sql      string
	class    classified
	stmt     dbhost.Stmt
	cond     *batchCond
	compile  *Error // e.g. an unknown sql_id: reported as the step's error
	hasNamed bool   // has a named argument without its prefix
}

// outcome is a batch's per-step results; a skipped step has neither.
type outcome struct {
	results []*stmtResultJSON
	errs    []*Error
}

// execution runs the requests of one HTTP request on one stream.
type execution struct {
	h        *Handler
	s        *stream
	ctx      context.Context
	bookmark dbhost.Bookmark // highest bookmark any statement reflected
}

var (
	errNeedsWrite = errors.New("hrana: statement needs the writer")
	errTxLeftOpen = errors.New("hrana: batch leaves a transaction open")
)

// virtualSavepoint stands in for BEGIN...COMMIT when a whole transaction runs
// inside one read or write group.
const virtualSavepoint = "hrana_tx"

func (x *execution) compileStmt(st *stmtJSON, cond *batchCond, defaultWantRows bool) step {
	var out step
	out.cond = cond
	sql, e := x.resolveSQL(st.SQL, st.SQLID)
	if e != nil {
		out.compile = e
		return out
	}
	out.sql = sql
	out.class = classify(sql)
	want := defaultWantRows
	if st.WantRows != nil {
		want = *st.WantRows
	}
	out.stmt = dbhost.Stmt{SQL: sql, WantRows: want}
	for _, a := range st.Args {
		out.stmt.Args = append(out.stmt.Args, dbhost.Value(a))
	}
	if len(st.NamedArgs) > 0 {
		out.stmt.NamedArgs = make(map[string]dbhost.Value, len(st.NamedArgs))
		for _, a := range st.NamedArgs {
			if a.Name == "" {
				out.compile = &Error{Code: "ARGS_INVALID", Message: "a named argument has an empty name"}
				return out
			}
			if !strings.ContainsRune(":@$?", rune(a.Name[0])) {
				out.hasNamed = true
			}
			out.stmt.NamedArgs[a.Name] = dbhost.Value(a.Value)
		}
	}
	return out
}

func (x *execution) resolveSQL(sql *string, id *int32) (string, *Error) {
	switch {
	case sql != nil && id != nil:
		return "", &Error{Code: "SQL_AND_SQL_ID", Message: "a statement gives both sql and sql_id; give exactly one"}
	case sql != nil:
		return *sql, nil
	case id != nil:
		text, ok := x.s.sqls[*id]
		if !ok {
			return "", &Error{Code: "SQL_ID_NOT_FOUND", Message: fmt.Sprintf("SQL text %d is not stored on this stream; send store_sql first", *id)}
		}
		return text, nil
	}
	return "", &Error{Code: "SQL_MISSING", Message: "a statement gives neither sql nor sql_id"}
}

// runSteps runs a batch on the stream: on its session when it holds one;
// otherwise in a read or write group, where a transaction that begins and
// ends inside the batch becomes a savepoint; otherwise on a new session.
func (x *execution) runSteps(steps []step) (outcome, *Error) {
	if x.s.sess != nil {
		return x.onSession(steps)
	}
	txControl, virtualOK, endsTx := false, true, false
	for _, st := range steps {
		if !st.class.isTxControl() {
			continue
		}
		txControl = true
		switch {
		case st.class.kind == kindSavepoint, st.class.readOnlyBegin:
			virtualOK = false
		case st.class.kind == kindCommit || st.class.kind == kindRollback:
			endsTx = true
		}
	}
	if !txControl {
		return x.onPool(steps, false)
	}
	if virtualOK && endsTx {
		out, err := x.onPool(steps, true)
		if err != errTxLeftOpenErr {
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
var errTxLeftOpenErr = &Error{Code: "TX_LEFT_OPEN"}

func (x *execution) onPool(steps []step, virtual bool) (outcome, *Error) {
	var plain []string
	for _, st := range steps {
		if st.compile == nil && !st.class.isTxControl() {
			plain = append(plain, st.sql)
		}
	}
	var out outcome
	bm, err := x.h.runAuto(x.ctx, x.s.db, plain, func(c dbhost.Conn) error {
		rc := &runConn{conn: c, pooled: true, virtual: virtual}
		out = rc.run(x.ctx, steps)
		if virtual && rc.virtualOpen {
			rc.abortVirtual(x.ctx)
			return errTxLeftOpen
		}
		return nil
	})
	if errors.Is(err, errTxLeftOpen) {
		return outcome{}, errTxLeftOpenErr
	}
	if err != nil {
		return outcome{}, toError(err, x.s.db.Name())
	}
	x.stamp(out, bm)
	return out, nil
}

// runAuto runs fn on a read connection when every statement is read-only, in
// the next write group otherwise. Unknown statements are described on the
// read connection first (and remembered).
func (h *Handler) runAuto(ctx context.Context, db dbhost.Database, sqls []string, fn func(dbhost.Conn) error) (dbhost.Bookmark, error) {
	var unknown []string
	for _, q := range sqls {
		ro, known := h.ro.get(q)
		if known && !ro {
			return db.Write(ctx, fn)
		}
		if !known {
			unknown = append(unknown, q)
		}
	}
	bm, err := db.Read(ctx, func(c dbhost.Conn) error {
		for _, q := range unknown {
			d, err := c.Describe(ctx, q)
			if err != nil {
				return errNeedsWrite // e.g. a table an earlier step creates: let the writer run it
			}
			h.ro.put(q, d.ReadOnly)
			if !d.ReadOnly {
				return errNeedsWrite
			}
		}
		return fn(c)
	})
	if errors.Is(err, errNeedsWrite) {
		return db.Write(ctx, fn)
	}
	return bm, err
}

func (x *execution) openSession() *Error {
	ctx, cancel := context.WithTimeout(x.ctx, x.h.cfg.TxTimeout)
	defer cancel()
	sess, err := x.s.db.Session(ctx)
	if err != nil {
		if ctx.Err() != nil && x.ctx.Err() == nil {
			return &Error{Code: "SQLITE_BUSY", Message: fmt.Sprintf(
				"database %q: no transaction could start within %s because another transaction holds the writer; retry", x.s.db.Name(), x.h.cfg.TxTimeout)}
		}
		return toError(err, x.s.db.Name())
	}
	x.s.sess, x.s.txStart, x.s.readOnlyTx = sess, time.Now(), false
	return nil
}

// onSession runs steps on the stream's session, bounded by the transaction
// deadline, and ends the session once the stream is back in autocommit: the
// commit is acknowledged only when Close has shipped it.
func (x *execution) onSession(steps []step) (outcome, *Error) {
	s := x.s
	deadline := s.txStart.Add(x.h.cfg.TxTimeout)
	if !time.Now().Before(deadline) {
		x.endSession()
		s.dead = &Error{Code: "TRANSACTION_TIMEOUT", Message: fmt.Sprintf(
			"the transaction on database %q was open for more than %s and was rolled back", s.db.Name(), x.h.cfg.TxTimeout)}
		return outcome{}, s.dead
	}
	ctx, cancel := context.WithDeadline(x.ctx, deadline)
	rc := &runConn{conn: s.sess, readOnlyTx: s.readOnlyTx, endCtx: x.ctx}
	out := rc.run(ctx, steps)
	cancel()
	s.readOnlyTx = rc.readOnlyTx
	if !s.sess.Autocommit() {
		return out, nil
	}
	bm, err := s.sess.Close(x.ctx)
	s.sess, s.readOnlyTx = nil, false
	if err != nil {
		e := toError(err, s.db.Name())
		e.Message = "the transaction was committed locally but could not be made durable: " + e.Message
		return outcome{}, e
	}
	x.stamp(out, bm)
	return out, nil
}

// endSession rolls back and drops the stream's session.
func (x *execution) endSession() {
	if x.s.sess != nil {
		x.h.closeSession(x.s.sess, "stream closed")
		x.s.sess, x.s.readOnlyTx = nil, false
	}
}

func (x *execution) autocommit() bool { return x.s.sess == nil || x.s.sess.Autocommit() }

// stamp sets the replication index of every result to bm.
func (x *execution) stamp(out outcome, bm dbhost.Bookmark) {
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

// runConn runs steps on one connection, tracking the transaction state that
// batch conditions (is_autocommit) see.
type runConn struct {
	conn        dbhost.Conn
	pooled      bool // a read or write group: its own transaction is invisible to the stream
	virtual     bool // BEGIN/COMMIT/ROLLBACK become a savepoint inside a group
	virtualOpen bool
	readOnlyTx  bool
	// endCtx runs COMMIT and ROLLBACK on a session without the transaction
	// deadline: the commit's durable upload must not be cut short by it.
	endCtx context.Context
}

func (rc *runConn) autocommit() bool {
	if rc.pooled {
		return !rc.virtualOpen
	}
	return rc.conn.Autocommit()
}

func (rc *runConn) run(ctx context.Context, steps []step) outcome {
	out := outcome{results: make([]*stmtResultJSON, len(steps)), errs: make([]*Error, len(steps))}
	for i := range steps {
		st := &steps[i]
		if st.cond != nil && !rc.eval(st.cond, out) {
			continue
		}
		if st.compile != nil {
			out.errs[i] = st.compile
			continue
		}
		res, err := rc.exec(ctx, st)
		if err != nil {
			out.errs[i] = toError(err, "")
			continue
		}
		out.results[i] = res
	}
	return out
}

func (rc *runConn) eval(c *batchCond, out outcome) bool {
	switch c.Type {
	case "ok":
		return out.results[*c.Step] != nil
	case "error":
		return out.errs[*c.Step] != nil
	case "not":
		return !rc.eval(c.Cond, out)
	case "and":
		for i := range c.Conds {
			if !rc.eval(&c.Conds[i], out) {
				return false
			}
		}
		return true
	case "or":
		for i := range c.Conds {
			if rc.eval(&c.Conds[i], out) {
				return true
			}
		}
		return false
	case "is_autocommit":
		return rc.autocommit()
	}
	return false // unreachable: conditions are validated before running
}

func sqliteError(msg string) *dbhost.Error {
	return &dbhost.Error{Code: "SQLITE_ERROR", Message: msg}
}

func (rc *runConn) exec(ctx context.Context, st *step) (*stmtResultJSON, error) {
	stmt := st.stmt
	if rc.endCtx != nil && (st.class.kind == kindCommit || st.class.kind == kindRollback) {
		ctx = rc.endCtx
	}
	if rc.virtual {
		switch st.class.kind {
		case kindBegin:
			if rc.virtualOpen {
				return nil, sqliteError("cannot start a transaction within a transaction")
			}
			if err := rc.execControl(ctx, "SAVEPOINT "+virtualSavepoint); err != nil {
				return nil, err
			}
			rc.virtualOpen = true
			return emptyResult(), nil
		case kindCommit:
			if !rc.virtualOpen {
				return nil, sqliteError("cannot commit - no transaction is active")
			}
			rc.virtualOpen = false
			return emptyResult(), rc.execControl(ctx, "RELEASE "+virtualSavepoint)
		case kindRollback:
			if !rc.virtualOpen {
				return nil, sqliteError("cannot rollback - no transaction is active")
			}
			rc.virtualOpen = false
			rc.abortVirtual(ctx)
			return emptyResult(), nil
		}
	} else if st.class.readOnlyBegin {
		stmt.SQL = "BEGIN DEFERRED"
	}
	if rc.readOnlyTx && st.class.kind == kindPlain {
		d, err := rc.conn.Describe(ctx, stmt.SQL)
		if err != nil {
			return nil, err
		}
		if !d.ReadOnly {
			return nil, &dbhost.Error{Code: "SQLITE_READONLY", Message: "attempt to write in a transaction opened READONLY"}
		}
	}
	if st.hasNamed {
		stmt.NamedArgs = rc.prefixNames(ctx, stmt)
	}
	res, err := rc.conn.Exec(ctx, stmt)
	if err != nil {
		return nil, err
	}
	if st.class.readOnlyBegin && !rc.virtual {
		rc.readOnlyTx = true
	}
	if !rc.virtual && rc.readOnlyTx && rc.conn.Autocommit() {
		rc.readOnlyTx = false
	}
	return toStmtResult(res, stmt.WantRows), nil
}

func (rc *runConn) execControl(ctx context.Context, sql string) error {
	_, err := rc.conn.Exec(ctx, dbhost.Stmt{SQL: sql})
	return err
}

// abortVirtual undoes the virtual transaction's savepoint.
func (rc *runConn) abortVirtual(ctx context.Context) {
	_ = rc.execControl(ctx, "ROLLBACK TO "+virtualSavepoint)
	_ = rc.execControl(ctx, "RELEASE "+virtualSavepoint)
	rc.virtualOpen = false
}

// prefixNames gives named arguments sent without a prefix the one the
// statement uses (":", "@" or "$"), as the Hrana spec asks servers to guess.
func (rc *runConn) prefixNames(ctx context.Context, stmt dbhost.Stmt) map[string]dbhost.Value {
	params := map[string]string{} // bare name -> name with prefix
	if d, err := rc.conn.Describe(ctx, stmt.SQL); err == nil {
		for _, p := range d.Params {
			if len(p) > 1 && strings.ContainsRune(":@$", rune(p[0])) {
				params[p[1:]] = p
			}
		}
	}
	named := make(map[string]dbhost.Value, len(stmt.NamedArgs))
	for name, v := range stmt.NamedArgs {
		if !strings.ContainsRune(":@$?", rune(name[0])) {
			if full, ok := params[name]; ok {
				name = full
			} else {
				name = ":" + name
			}
		}
		named[name] = v
	}
	return named
}

func emptyResult() *stmtResultJSON {
	return &stmtResultJSON{Cols: []colJSON{}, Rows: [][]valueJSON{}}
}

func toStmtResult(res dbhost.Result, wantRows bool) *stmtResultJSON {
	out := &stmtResultJSON{
		Cols:             make([]colJSON, len(res.Columns)),
		Rows:             [][]valueJSON{},
		AffectedRowCount: res.Changes,
		LastInsertRowID:  ptr(strconv.FormatInt(res.LastInsertRowID, 10)),
		RowsRead:         res.RowsRead,
		RowsWritten:      res.RowsWritten,
		QueryDurationMS:  float64(res.Duration) / float64(time.Millisecond),
	}
	for i, c := range res.Columns {
		out.Cols[i] = colJSON{Name: ptr(c.Name), DeclType: stringOrNil(c.DeclType)}
	}
	if wantRows {
		out.Rows = make([][]valueJSON, len(res.Rows))
		for i, row := range res.Rows {
			vals := make([]valueJSON, len(row))
			for j, v := range row {
				vals[j] = valueJSON(v)
			}
			out.Rows[i] = vals
		}
	}
	return out
}

// toError maps an error from dbhost (or the context) to Hrana's Error.
func toError(err error, db string) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	var de *dbhost.Error
	if errors.As(err, &de) {
		return &Error{Code: de.Code, Message: de.Message}
	}
	on := ""
	if db != "" {
		on = fmt.Sprintf(" on database %q", db)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: "TIMEOUT", Message: "the statement" + on + " ran past its deadline (transaction or request timeout) and was interrupted"}
	case errors.Is(err, context.Canceled):
		return &Error{Code: "CANCELED", Message: "the request" + on + " was canceled"}
	}
	return &Error{Code: "INTERNAL_ERROR", Message: err.Error()}
}
