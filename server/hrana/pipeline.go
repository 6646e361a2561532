package hrana

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
)

func (h *Handler) servePipeline(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	var body pipelineReqBody
	if e := h.decodeBody(w, r, &body); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	return h.runPipeline(w, r, db, &body, true, writePipeline)
}

// runPipeline runs a pipeline's requests on its stream; answer writes the
// response in the request's encoding (errors before anything ran are JSON,
// the only error body the clients parse). streamRows: answer is
// writePipeline, which writes rows encoded as SQLite stepped them. On a
// read replica that refused a write or a session it stops, answers nothing
// and returns the *readreplica.NeedsWriterError (see ServeRead).
func (h *Handler) runPipeline(w http.ResponseWriter, r *http.Request, db dbhost.Database, body *pipelineReqBody,
	streamRows bool, answer func(http.ResponseWriter, *pipelineRespBody, dbhost.Bookmark)) error {
	for i := range body.Requests {
		if e := validateRequest(&body.Requests[i]); e != nil {
			e.Message = fmt.Sprintf("request %d: %s", i, e.Message)
			writeHTTPError(w, http.StatusBadRequest, e)
			return nil
		}
	}
	ctx, idem, e := requestContext(r, body.Requests)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	// A pipeline that ends with close never keeps its stream, so it needs
	// no slot of the stream quotas (one-shot queries work at any load).
	n := len(body.Requests)
	oneShot := n > 0 && body.Requests[n-1].Type == "close"
	s, status, e := h.acquire(body.Baton, db, ownerFrom(r.Context()), oneShot)
	if e != nil {
		writeHTTPError(w, status, e)
		return nil
	}
	released := false
	defer h.endOnPanic(w, s, &released)
	x, cancel := h.newExecution(ctx, s)
	defer cancel()
	x.streamRows = streamRows
	resp := pipelineRespBody{Results: make([]streamResult, 0, len(body.Requests))}
	for i := range body.Requests {
		resp.Results = append(resp.Results, x.handle(&body.Requests[i]))
		if x.needsWriter != nil {
			break
		}
	}
	if x.needsWriter != nil {
		s.closed = true // the writer runs the request; nothing of it stays here
		h.release(s)
		released = true
		return x.needsWriter
	}
	resp.Baton, released = h.release(s), true
	markReplayed(w, idem)
	answer(w, &resp, x.bookmark)
	return nil
}

func okResult(resp any) streamResult  { return streamResult{Type: "ok", Response: resp} }
func errResult(e *Error) streamResult { return streamResult{Type: "error", Error: e} }

// handle runs one stream request. Errors of the request itself are results;
// the pipeline goes on with the next request.
func (x *execution) handle(req *streamRequest) streamResult {
	s := x.s
	if s.closed {
		return errResult(&Error{Code: dberr.CodeStreamClosed, Message: "the stream was closed by an earlier request"})
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
		return okResult(executeResponse{Result: out.results[0]})
	case "batch":
		res, e := x.batch(req.Batch)
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
			return errResult(&Error{Code: "SQL_ID_IN_USE", Message: fmt.Sprintf("SQL text id %d is already in use on this stream; close_sql it first", *req.SQLID)})
		}
		if len(s.sqls) >= maxStoredSQL {
			return errResult(&Error{Code: dberr.CodeSQLStoreFull, Message: fmt.Sprintf("a stream may store at most %d SQL texts; close_sql some first", maxStoredSQL)})
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
		x.endSession()
		s.closed = true
		return okResult(map[string]string{"type": "close"})
	case "get_autocommit":
		return okResult(map[string]any{"type": "get_autocommit", "is_autocommit": x.autocommit()})
	}
	return errResult(&Error{Code: dberr.CodeProtocolError, Message: "unknown request type " + req.Type})
}

func (x *execution) batch(b *batchJSON) (*batchResultJSON, *Error) {
	steps := make([]step, len(b.Steps))
	for i := range b.Steps {
		steps[i] = x.compileStmt(&b.Steps[i].Stmt, b.Steps[i].Condition, true)
	}
	out, e := x.runSteps(steps)
	if e != nil {
		return nil, e
	}
	res := &batchResultJSON{StepResults: out.results, StepErrors: out.errs}
	for _, r := range out.results {
		if r != nil && r.ReplicationIndex != nil {
			res.ReplicationIndex = r.ReplicationIndex
		}
	}
	return res, nil
}

// sequence runs a semicolon-separated script, stopping at the first error.
func (x *execution) sequence(sql *string, id *int32) *Error {
	text, e := x.resolveSQL(sql, id)
	if e != nil {
		return e
	}
	stmts := sqltext.Split(text)
	steps := make([]step, len(stmts))
	for i, q := range stmts {
		var cond *batchCond
		if i > 0 {
			cond = &batchCond{Type: "ok", Step: ptr(uint32(i - 1))}
		}
		steps[i] = x.compileStmt(&stmtJSON{SQL: &q}, cond, false)
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

func (x *execution) describe(sql *string, id *int32) (*describeResultJSON, *Error) {
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
		return nil, toError(err, x.s.db.Name())
	}
	res := &describeResultJSON{Params: make([]describeParam, len(d.Params)), Cols: make([]describeCol, len(d.Columns)),
		IsExplain: d.Explain, IsReadonly: d.ReadOnly}
	for i, p := range d.Params {
		res.Params[i] = describeParam{Name: stringOrNil(p)}
	}
	for i, c := range d.Columns {
		res.Cols[i] = describeCol{Name: c.Name, DeclType: stringOrNil(c.DeclType)}
	}
	return res, nil
}

// validateRequest rejects malformed requests before anything runs: a
// pipeline either is well-formed or does nothing.
func validateRequest(req *streamRequest) *Error {
	bad := func(format string, args ...any) *Error {
		return &Error{Code: dberr.CodeProtocolError, Message: fmt.Sprintf(format, args...)}
	}
	switch req.Type {
	case "execute":
		if req.Stmt == nil {
			return bad("execute needs a stmt")
		}
	case "batch":
		if req.Batch == nil {
			return bad("batch needs a batch")
		}
		return validateBatch(req.Batch)
	case "sequence", "describe":
		if (req.SQL == nil) == (req.SQLID == nil) {
			return bad("%s needs exactly one of sql and sql_id", req.Type)
		}
	case "store_sql":
		if req.SQL == nil || req.SQLID == nil {
			return bad("store_sql needs sql and sql_id")
		}
	case "close_sql":
		if req.SQLID == nil {
			return bad("close_sql needs sql_id")
		}
	case "close", "get_autocommit":
	case "":
		return bad("a request has no type")
	default:
		return bad("unknown request type %q (want execute, batch, sequence, describe, store_sql, close_sql, close or get_autocommit)", req.Type)
	}
	return nil
}

func validateBatch(b *batchJSON) *Error {
	for i := range b.Steps {
		if c := b.Steps[i].Condition; c != nil {
			if e := validateCond(c, i); e != nil {
				e.Message = fmt.Sprintf("batch step %d: %s", i, e.Message)
				return e
			}
		}
	}
	return nil
}

// validateCond checks a condition of step i: it may refer to earlier steps only.
func validateCond(c *batchCond, i int) *Error {
	bad := func(format string, args ...any) *Error {
		return &Error{Code: dberr.CodeProtocolError, Message: fmt.Sprintf(format, args...)}
	}
	switch c.Type {
	case "ok", "error":
		if c.Step == nil {
			return bad("condition %q needs a step", c.Type)
		}
		if int(*c.Step) >= i {
			return bad("condition %q refers to step %d, which does not run before this step", c.Type, *c.Step)
		}
	case "not":
		if c.Cond == nil {
			return bad("condition \"not\" needs a cond")
		}
		return validateCond(c.Cond, i)
	case "and", "or":
		for j := range c.Conds {
			if e := validateCond(&c.Conds[j], i); e != nil {
				return e
			}
		}
	case "is_autocommit":
	default:
		return bad("unknown condition type %q", c.Type)
	}
	return nil
}
