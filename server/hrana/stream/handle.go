package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
)

func okResult(resp any) proto.StreamResult        { return proto.StreamResult{Type: "ok", Response: resp} }
func errResult(e *proto.Error) proto.StreamResult { return proto.StreamResult{Type: "error", Error: e} }

// Handle runs one stream request. Errors of the request itself are results;
// the pipeline goes on with the next request.
func (x *Execution) Handle(req *proto.StreamRequest) proto.StreamResult {
	s := x.s
	if s.closed {
		return errResult(&proto.Error{Code: dberr.CodeStreamClosed, Message: "the stream was closed by an earlier request"})
	}
	if s.dead != nil {
		return errResult(s.dead)
	}
	if e := x.timedOut(); e != nil && req.Type != "close" {
		return errResult(e)
	}
	switch req.Type {
	case "execute":
		out, e := x.runSteps([]step{x.compileStmt(req.Stmt, nil, true)})
		if e != nil {
			return errResult(e)
		}
		if out.errs[0] != nil {
			return errResult(out.errs[0])
		}
		return okResult(proto.ExecuteResponse{Result: out.results[0]})
	case "batch":
		res, e := x.Batch(req.Batch)
		if e != nil {
			return errResult(e)
		}
		return okResult(map[string]any{"type": "batch", "result": res})
	case "sequence":
		if e := x.sequence(req.SQL, req.SQLID); e != nil {
			return errResult(e)
		}
		return okResult(map[string]string{"type": "sequence"})
	case "describe":
		res, e := x.describe(req.SQL, req.SQLID)
		if e != nil {
			return errResult(e)
		}
		return okResult(map[string]any{"type": "describe", "result": res})
	case "store_sql":
		if _, used := s.sqls[*req.SQLID]; used {
			return errResult(&proto.Error{Code: "SQL_ID_IN_USE", Message: fmt.Sprintf("SQL text id %d is already in use on this stream; close_sql it first", *req.SQLID)})
		}
		if len(s.sqls) >= MaxStoredSQL {
			return errResult(&proto.Error{Code: dberr.CodeSQLStoreFull, Message: fmt.Sprintf("a stream may store at most %d SQL texts; close_sql some first", MaxStoredSQL)})
		}
		if s.sqls == nil {
			s.sqls = map[int32]string{}
		}
		s.sqls[*req.SQLID] = *req.SQL
		return okResult(map[string]string{"type": "store_sql"})
	case "close_sql":
		delete(s.sqls, *req.SQLID)
		return okResult(map[string]string{"type": "close_sql"})
	case "close":
		x.EndSession()
		s.closed = true
		return okResult(map[string]string{"type": "close"})
	case "get_autocommit":
		return okResult(map[string]any{"type": "get_autocommit", "is_autocommit": x.autocommit()})
	}
	return errResult(&proto.Error{Code: dberr.CodeProtocolError, Message: "unknown request type " + req.Type})
}

func (x *Execution) Batch(b *proto.Batch) (*proto.BatchResult, *proto.Error) {
	steps := make([]step, len(b.Steps))
	for i := range b.Steps {
		steps[i] = x.compileStmt(&b.Steps[i].Stmt, b.Steps[i].Condition, true)
	}
	out, e := x.runSteps(steps)
	if e != nil {
		return nil, e
	}
	res := &proto.BatchResult{StepResults: out.results, StepErrors: out.errs}
	for _, r := range out.results {
		if r != nil && r.ReplicationIndex != nil {
			res.ReplicationIndex = r.ReplicationIndex
		}
	}
	return res, nil
}

// sequence runs a semicolon-separated script, stopping at the first error.
func (x *Execution) sequence(sql *string, id *int32) *proto.Error {
	text, e := x.resolveSQL(sql, id)
	if e != nil {
		return e
	}
	stmts := sqltext.Split(text)
	steps := make([]step, len(stmts))
	for i, q := range stmts {
		var cond *proto.BatchCond
		if i > 0 {
			cond = &proto.BatchCond{Type: "ok", Step: ptr(uint32(i - 1))}
		}
		steps[i] = x.compileStmt(&proto.Stmt{SQL: &q}, cond, false)
	}
	out, e := x.runSteps(steps)
	if e != nil {
		return e
	}
	for _, err := range out.errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (x *Execution) describe(sql *string, id *int32) (*proto.DescribeResult, *proto.Error) {
	text, e := x.resolveSQL(sql, id)
	if e != nil {
		return nil, e
	}
	var d sqlconn.Description
	var err error
	if x.s.sess != nil {
		d, err = x.s.sess.Describe(x.ctx, text)
	} else {
		_, err = x.s.db.Read(x.ctx, func(c sqlconn.Conn) error {
			d, err = c.Describe(x.ctx, text)
			return err
		})
		if errors.Is(err, dberr.ErrNeedsOwnConnection) {
			// A shared connection does not even prepare it; a connection of
			// its own does (describing runs nothing, so none is kept).
			var sess dbhost.Session
			if sess, err = x.s.db.Session(x.ctx); err == nil {
				d, err = sess.Describe(x.ctx, text)
				sess.Close(context.WithoutCancel(x.ctx))
			}
		}
	}
	if err != nil {
		x.noteNeedsWriter(err)
		return nil, ToError(err, x.s.db.Name())
	}
	res := &proto.DescribeResult{Params: make([]proto.DescribeParam, len(d.Params)), Cols: make([]proto.DescribeCol, len(d.Columns)),
		IsExplain: d.Explain, IsReadonly: d.ReadOnly}
	for i, p := range d.Params {
		res.Params[i] = proto.DescribeParam{Name: stringOrNil(p)}
	}
	for i, c := range d.Columns {
		res.Cols[i] = proto.DescribeCol{Name: c.Name, DeclType: stringOrNil(c.DeclType)}
	}
	return res, nil
}
