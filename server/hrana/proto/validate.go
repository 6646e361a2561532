package proto

import (
	"fmt"

	"github.com/sluicedb/sluice/server/dberr"
)

// Validate rejects malformed requests before anything runs: a
// pipeline either is well-formed or does nothing.
func (req *StreamRequest) Validate() *Error {
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
		return req.Batch.Validate()
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

// Validate checks the batch's conditions.
func (b *Batch) Validate() *Error {
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
func validateCond(c *BatchCond, i int) *Error {
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
