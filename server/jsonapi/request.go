package jsonapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// request runs the statements of one query request.
type request struct {
	stmts    []sqlconn.Stmt
	results  []sqlconn.Result
	parent   context.Context // the HTTP request's
	limit    time.Duration   // bounds the statements together
	name     string
	readOnly bool // the token may only read
	// enc receives the rows of a run on a read connection as SQLite steps
	// them; streamed says the answer is in it (that run succeeded) rather
	// than in results. Both are touched only on the handler's goroutine:
	// reads run there, writes (on the writer's) never stream.
	enc      *resultsEncoder
	streamed bool
}

func (q *request) sqls() []string {
	out := make([]string, len(q.stmts))
	for i, st := range q.stmts {
		out[i] = st.SQL
	}
	return out
}

// bounded is the context the statements run under: the request's time limit
// starts when they do and bounds only them. Waiting for the writer or for
// the upload stays under the caller's context, so a request that committed
// is never answered as timed out.
func (q *request) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(q.parent, q.limit)
}

// runAll is the RunAuto callback: every statement, a batch of reads in one
// snapshot.
func (q *request) runAll(c sqlconn.Conn, onReader bool) error {
	ctx, cancel := q.bounded()
	defer cancel()
	q.enc.cancel, q.enc.ctx = cancel, ctx // an answer past its cap stops the statement
	if !onReader {
		return q.run(ctx, c, 0, len(q.stmts), false)
	}
	if len(q.stmts) == 1 {
		return q.stream(ctx, c)
	}
	if _, err := c.Exec(ctx, sqlconn.Stmt{SQL: "BEGIN"}); err != nil {
		return err
	}
	err := q.stream(ctx, c)
	c.Exec(context.WithoutCancel(ctx), sqlconn.Stmt{SQL: "COMMIT"})
	return err
}

// stream runs every statement on a read connection, their rows encoded
// into q.enc as they are stepped. A failure leaves q.streamed false: the
// request may yet run in a write group, answered from q.results.
func (q *request) stream(ctx context.Context, c sqlconn.Conn) error {
	q.enc.reset()
	for i := range q.stmts {
		q.enc.begin(i)
		st := q.stmts[i]
		if st.WantRows {
			st.Rows = q.enc
		}
		res, err := q.exec(ctx, c, i, st, true)
		if q.enc.tooBig != nil {
			return q.enc.tooBig
		}
		if err != nil {
			return err
		}
		q.results[i] = res
		q.enc.end(res)
	}
	q.streamed = true
	return nil
}

// run executes stmts[from:to] on c. rerun: a write met on a read connection
// is returned as it is, for RunAuto to run the request in a write group; a
// statement that needs a connection of its own always is.
func (q *request) run(ctx context.Context, c sqlconn.Conn, from, to int, rerun bool) error {
	for i := from; i < to; i++ {
		res, err := q.exec(ctx, c, i, q.stmts[i], rerun)
		if err != nil {
			return err
		}
		q.results[i] = res
	}
	return nil
}

// exec runs st, statement i, on c; its error as run explains.
func (q *request) exec(ctx context.Context, c sqlconn.Conn, i int, st sqlconn.Stmt, rerun bool) (sqlconn.Result, error) {
	res, err := c.Exec(ctx, st)
	if err == nil {
		return res, nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && q.parent.Err() == nil {
		return res, &dberr.Error{Code: dberr.CodeTimeout, Message: fmt.Sprintf(
			"the request ran past its time limit (%s, limits.request_timeout) at statement %d of %d; none of it was applied",
			q.limit, i+1, len(q.stmts))}
	}
	if errors.Is(err, dberr.ErrNeedsOwnConnection) || (rerun && errors.Is(err, dberr.ErrReadOnly)) {
		return res, err
	}
	if errors.Is(err, dberr.ErrReadOnly) && q.readOnly {
		err = readOnlyToken(err, q.name)
	}
	return res, statementError(i, len(q.stmts), err)
}

// runOwn runs a request that changes its connection (a connection-state
// pragma such as foreign_keys=OFF, or a TEMP object) on a connection of its
// own, closed when the request ends, so nothing of it reaches another client.
// The request keeps its contract, one transaction: the PRAGMA statements it
// begins with run before that transaction and those it ends with after it,
// as a migration script does on a local file (foreign_keys, for one, is a
// no-op inside a transaction); everything else runs inside.
func (q *request) runOwn(ctx context.Context, db dbhost.Database, idem *groupcommit.Idempotency) (dbhost.Bookmark, error) {
	if idem != nil {
		// A keyed request's answer is stored in the transaction of its write
		// group, which this request does not use.
		return 0, &dberr.Error{Code: dberr.CodeBadRequest, Message: "this request changes its connection " +
			"(a connection pragma or a TEMP object), so it cannot run with an Idempotency-Key; send it without one"}
	}
	for i, st := range q.stmts {
		if sqltext.Classify(st.SQL).IsTxControl() {
			return 0, statementError(i, len(q.stmts), dberr.New(dberr.CodeForbidden, "statement refused: BEGIN/COMMIT/ROLLBACK are refused here: each request already runs in its own transaction"))
		}
	}
	sess, err := db.Session(ctx)
	if err != nil {
		return 0, err
	}
	first, last := 0, len(q.stmts)
	for first < last && sqltext.FirstKeyword(q.stmts[first].SQL) == "PRAGMA" {
		first++
	}
	for last > first && sqltext.FirstKeyword(q.stmts[last-1].SQL) == "PRAGMA" {
		last--
	}
	bounded, cancel := q.bounded()
	err = q.run(bounded, sess, 0, first, false)
	if err == nil && first < last {
		err = q.inTransaction(bounded, sess, first, last)
	}
	if err == nil {
		err = q.run(bounded, sess, last, len(q.stmts), false)
	}
	cancel()
	bm, cerr := sess.Close(context.WithoutCancel(ctx))
	if err == nil {
		err = cerr
	}
	return bm, err
}

// inTransaction runs stmts[from:to] on sess in one transaction: committed
// (and durable, see Session.Exec) when all succeed, rolled back otherwise.
func (q *request) inTransaction(ctx context.Context, sess dbhost.Session, from, to int) error {
	if _, err := sess.Exec(ctx, sqlconn.Stmt{SQL: "BEGIN IMMEDIATE"}); err != nil {
		return err
	}
	if err := q.run(ctx, sess, from, to, false); err != nil {
		if !sess.Autocommit() {
			sess.Exec(context.WithoutCancel(ctx), sqlconn.Stmt{SQL: "ROLLBACK"})
		}
		return err
	}
	_, err := sess.Exec(context.WithoutCancel(ctx), sqlconn.Stmt{SQL: "COMMIT"})
	return err
}
