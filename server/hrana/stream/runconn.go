package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// runConn runs steps on one connection, tracking the transaction state that
// batch conditions (is_autocommit) see.
type runConn struct {
	conn        sqlconn.Conn
	pooled      bool // a read or write group: its own transaction is invisible to the stream
	onReader    bool // a pooled read connection: a statement that writes makes the batch rerun as a write
	virtual     bool // BEGIN/COMMIT/ROLLBACK become a savepoint inside a group
	virtualOpen bool
	readOnlyTx  bool
	// endCtx runs COMMIT and ROLLBACK on a session without the transaction
	// deadline: the commit's durable upload must not be cut short by it.
	endCtx context.Context
	// stop is the request's context: once it is done no further step starts
	// (each would only be interrupted, one after the other, on the writer).
	stop context.Context
	// rerun stops a pooled run: the batch runs again elsewhere (in a write
	// group: dbhost.ErrWriteNeeded; on a session: a statement that changes
	// the connection). What ran is rolled back with the group's request.
	rerun error
	// broken stops a session's run: its connection failed and was closed.
	broken *proto.Error
	// stream encodes rows as SQLite steps them (StmtResult.RowsJSON)
	// instead of collecting them in Rows.
	stream bool
	lines  bool // rows as JSON cursor row entries (Execution.RowLines)
	// budget caps the request's answer (budget.go); the run starts from
	// mark, what the request's earlier batches hold.
	budget *proto.Budget
	mark   int
}

func (rc *runConn) autocommit() bool {
	if rc.pooled {
		return !rc.virtualOpen
	}
	return rc.conn.Autocommit()
}

func (rc *runConn) run(ctx context.Context, steps []step) outcome {
	out := outcome{results: make([]*proto.StmtResult, len(steps)), errs: make([]*proto.Error, len(steps))}
	rc.budget.Rewind(rc.mark) // a batch run again (on the writer, on a session) starts over
	for i := range steps {
		st := &steps[i]
		if rc.stop != nil && rc.stop.Err() != nil {
			out.errs[i] = ToError(rc.stop.Err(), "")
			continue
		}
		if st.cond != nil && !rc.eval(st.cond, out) {
			continue
		}
		if st.compile != nil {
			out.errs[i] = st.compile
			continue
		}
		res, err := rc.exec(ctx, st)
		switch {
		case err == nil:
			out.results[i] = res
			continue
		case rc.pooled && errors.Is(err, dberr.ErrNeedsOwnConnection):
			rc.rerun = err
		case rc.onReader && errors.Is(err, dberr.ErrReadOnly):
			rc.rerun = dbhost.ErrWriteNeeded
		case !rc.pooled && (errors.Is(err, dberr.ErrInternal) || errors.Is(err, dbhost.ErrSessionEnded)):
			rc.broken = ToError(err, "")
		}
		out.errs[i] = ToError(err, "")
		if rc.rerun != nil || rc.broken != nil {
			for j := i + 1; j < len(steps); j++ {
				out.errs[j] = rc.broken
			}
			break
		}
	}
	return out
}

func (rc *runConn) eval(c *proto.BatchCond, out outcome) bool {
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

func sqliteError(msg string) *dberr.Error {
	return dberr.New(dberr.CodeSQLiteError, msg)
}

func (rc *runConn) exec(ctx context.Context, st *step) (*proto.StmtResult, error) {
	stmt := st.stmt
	if rc.endCtx != nil && (st.class.Kind == sqltext.Commit || st.class.Kind == sqltext.Rollback) {
		ctx = rc.endCtx
	}
	if rc.virtual {
		switch st.class.Kind {
		case sqltext.Begin:
			if rc.virtualOpen {
				return nil, sqliteError("cannot start a transaction within a transaction")
			}
			if err := rc.execControl(ctx, "SAVEPOINT "+virtualSavepoint); err != nil {
				return nil, err
			}
			rc.virtualOpen = true
			return emptyResult(), nil
		case sqltext.Commit:
			if !rc.virtualOpen {
				return nil, sqliteError("cannot commit - no transaction is active")
			}
			rc.virtualOpen = false
			return emptyResult(), rc.execControl(ctx, "RELEASE "+virtualSavepoint)
		case sqltext.Rollback:
			if !rc.virtualOpen {
				return nil, sqliteError("cannot rollback - no transaction is active")
			}
			rc.virtualOpen = false
			rc.abortVirtual(ctx)
			return emptyResult(), nil
		}
	} else if st.class.ReadOnlyBegin {
		stmt.SQL = "BEGIN DEFERRED"
	}
	if rc.readOnlyTx && st.class.Kind == sqltext.Plain {
		d, err := rc.conn.Describe(ctx, stmt.SQL)
		if err != nil {
			return nil, err
		}
		if !d.ReadOnly {
			return nil, dberr.New(dberr.CodeSQLiteReadOnly, "attempt to write in a transaction opened READONLY")
		}
	}
	if st.hasNamed {
		stmt.NamedArgs = rc.prefixNames(ctx, stmt)
	}
	if rc.budget != nil && stmt.WantRows && !rc.stream {
		return rc.execCollected(ctx, st, stmt)
	}
	var rows *proto.RowsEncoder
	if rc.stream && stmt.WantRows {
		rows = &proto.RowsEncoder{Budget: rc.budget, Lines: rc.lines}
		stmt.Rows = rows
		if rc.budget != nil {
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			defer stop()
			rows.Stop = stop
			rc.largeTurn(ctx)
			defer rc.budget.Built()
		}
	}
	res, err := rc.conn.Exec(ctx, stmt)
	if rows != nil && rows.TooBig() {
		return nil, rc.budget.TooBig()
	}
	if err != nil {
		return nil, err
	}
	rc.noteTx(st)
	out := toStmtResult(res, stmt.WantRows)
	if rows != nil { // a Conn that does not stream filled Rows instead
		if enc, streamed := rows.Detach(); streamed {
			out.RowsJSON = enc
		} else if !rc.budget.ChargeRows(res.Rows) {
			return nil, rc.budget.TooBig()
		}
	}
	rc.budget.ChargeResult(len(res.Columns))
	return out, nil
}

// noteTx follows a READONLY transaction the statement began or ended.
func (rc *runConn) noteTx(st *step) {
	if st.class.ReadOnlyBegin && !rc.virtual {
		rc.readOnlyTx = true
	}
	if !rc.virtual && rc.readOnlyTx && rc.conn.Autocommit() {
		rc.readOnlyTx = false
	}
}

func (rc *runConn) execControl(ctx context.Context, sql string) error {
	_, err := rc.conn.Exec(ctx, sqlconn.Stmt{SQL: sql})
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
func (rc *runConn) prefixNames(ctx context.Context, stmt sqlconn.Stmt) map[string]sqlconn.Value {
	params := map[string]string{} // bare name -> name with prefix
	if d, err := rc.conn.Describe(ctx, stmt.SQL); err == nil {
		for _, p := range d.Params {
			if len(p) > 1 && strings.ContainsRune(":@$", rune(p[0])) {
				params[p[1:]] = p
			}
		}
	}
	named := make(map[string]sqlconn.Value, len(stmt.NamedArgs))
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

func emptyResult() *proto.StmtResult {
	return &proto.StmtResult{Cols: []proto.Col{}, Rows: [][]proto.Value{}}
}

func toStmtResult(res sqlconn.Result, wantRows bool) *proto.StmtResult {
	out := &proto.StmtResult{
		Cols:             make([]proto.Col, len(res.Columns)),
		Rows:             [][]proto.Value{},
		AffectedRowCount: res.Changes,
		LastInsertRowID:  ptr(strconv.FormatInt(res.LastInsertRowID, 10)),
		RowsRead:         res.RowsRead,
		RowsWritten:      res.RowsWritten,
		QueryDurationMS:  float64(res.Duration) / float64(time.Millisecond),
	}
	for i, c := range res.Columns {
		out.Cols[i] = proto.Col{Name: ptr(c.Name), DeclType: stringOrNil(c.DeclType)}
	}
	if wantRows {
		out.Rows = make([][]proto.Value, len(res.Rows))
		for i, row := range res.Rows {
			vals := make([]proto.Value, len(row))
			for j, v := range row {
				vals[j] = proto.Value(v)
			}
			out.Rows[i] = vals
		}
	}
	return out
}

// ToError maps an error from dbhost (or the context) to Hrana's Error.
func ToError(err error, db string) *proto.Error {
	var he *proto.Error
	if errors.As(err, &he) {
		return he
	}
	var de *dberr.Error
	if errors.As(err, &de) {
		// sqld answers SQLite's primary code (SQLITE_CONSTRAINT, never
		// SQLITE_CONSTRAINT_UNIQUE), and applications written against it
		// compare that; the extended code rides beside it.
		e := &proto.Error{Code: de.Code, Message: de.Message}
		if primary, extended := sqlconn.PrimaryCode(de.Code); extended {
			e.Code, e.ExtendedCode = primary, de.Code
		}
		return e
	}
	on := ""
	if db != "" {
		on = fmt.Sprintf(" on database %q", db)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &proto.Error{Code: dberr.CodeTimeout, Message: "the statement" + on + " ran past its deadline (transaction or request timeout) and was interrupted"}
	case errors.Is(err, context.Canceled):
		return &proto.Error{Code: "CANCELED", Message: "the request" + on + " was canceled"}
	}
	return &proto.Error{Code: dberr.CodeInternalError, Message: err.Error()}
}
