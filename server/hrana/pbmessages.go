package hrana

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sluicedb/sluice/server/sqlconn"
	"google.golang.org/protobuf/encoding/protowire"
)

// The shared structures of the Hrana 3 protobuf schema (docs/HRANA_3_SPEC.md,
// "Shared structures" and "Hrana over HTTP"), decoded into and encoded from
// the JSON structs.

func pbDecodePipelineReq(b []byte) (*pipelineReqBody, error) {
	body := &pipelineReqBody{}
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1:
			s, err := f.str()
			body.Baton = &s
			return err
		case 2:
			m, err := f.message()
			if err != nil {
				return err
			}
			req, err := pbDecodeStreamRequest(m)
			if err != nil {
				return fmt.Errorf("request %d: %w", len(body.Requests), err)
			}
			body.Requests = append(body.Requests, req)
		}
		return nil
	})
	return body, err
}

func pbDecodeCursorReq(b []byte) (*cursorReqBody, error) {
	body := &cursorReqBody{}
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1:
			s, err := f.str()
			body.Baton = &s
			return err
		case 2:
			m, err := f.message()
			if err != nil {
				return err
			}
			body.Batch, err = pbDecodeBatch(m)
			return err
		}
		return nil
	})
	return body, err
}

// streamRequestTypes are StreamRequest's oneof fields, by number.
var streamRequestTypes = map[protowire.Number]string{
	1: "close", 2: "execute", 3: "batch", 4: "sequence", 5: "describe", 6: "store_sql", 7: "close_sql", 8: "get_autocommit",
}

func pbDecodeStreamRequest(b []byte) (streamRequest, error) {
	var req streamRequest
	err := pbEach(b, func(f pbField) error {
		typ, ok := streamRequestTypes[f.num]
		if !ok {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		req = streamRequest{Type: typ} // a oneof: the last one wins
		return pbDecodeRequestFields(m, &req, 0)
	})
	return req, err
}

// pbDecodeRequestFields decodes the body of one stream request (HTTP) or
// WebSocket request into req. Field numbers start after first (the
// WebSocket requests put stream_id first).
func pbDecodeRequestFields(b []byte, req *streamRequest, first protowire.Number) error {
	return pbEach(b, func(f pbField) error {
		var err error
		switch req.Type {
		case "execute":
			if f.num == first+1 {
				var m []byte
				if m, err = f.message(); err == nil {
					req.Stmt, err = pbDecodeStmt(m)
				}
			}
		case "batch":
			if f.num == first+1 {
				var m []byte
				if m, err = f.message(); err == nil {
					req.Batch, err = pbDecodeBatch(m)
				}
			}
		case "sequence", "describe":
			switch f.num {
			case first + 1:
				var s string
				s, err = f.str()
				req.SQL = &s
			case first + 2:
				var id int32
				id, err = f.int32()
				req.SQLID = &id
			}
		case "store_sql":
			switch f.num {
			case 1:
				var id int32
				id, err = f.int32()
				req.SQLID = &id
			case 2:
				var s string
				s, err = f.str()
				req.SQL = &s
			}
		case "close_sql":
			if f.num == 1 {
				var id int32
				id, err = f.int32()
				req.SQLID = &id
			}
		}
		return err
	})
}

func pbDecodeStmt(b []byte) (*stmtJSON, error) {
	st := &stmtJSON{}
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1:
			s, err := f.str()
			st.SQL = &s
			return err
		case 2:
			id, err := f.int32()
			st.SQLID = &id
			return err
		case 3:
			m, err := f.message()
			if err != nil {
				return err
			}
			v, err := pbDecodeValue(m)
			if err != nil {
				return fmt.Errorf("argument %d: %w", len(st.Args)+1, err)
			}
			st.Args = append(st.Args, v)
		case 4:
			m, err := f.message()
			if err != nil {
				return err
			}
			a, err := pbDecodeNamedArg(m)
			if err != nil {
				return err
			}
			st.NamedArgs = append(st.NamedArgs, a)
		case 5:
			want, err := f.bool()
			st.WantRows = &want
			return err
		}
		return nil
	})
	return st, err
}

func pbDecodeNamedArg(b []byte) (namedArg, error) {
	var a namedArg
	hasValue := false
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1:
			s, err := f.str()
			a.Name = s
			return err
		case 2:
			m, err := f.message()
			if err != nil {
				return err
			}
			a.Value, err = pbDecodeValue(m)
			hasValue = true
			return err
		}
		return nil
	})
	if err == nil && !hasValue {
		err = fmt.Errorf("named argument %q has no value", a.Name)
	}
	return a, err
}

var errValueWithoutType = errors.New("a value has no type (want null, integer, float, text or blob)")

func pbDecodeValue(b []byte) (valueJSON, error) {
	var v valueJSON
	set := false
	err := pbEach(b, func(f pbField) error {
		var err error
		switch f.num {
		case 1:
			_, err = f.message()
			v = valueJSON{Type: sqlconn.Null}
		case 2:
			err = f.want(protowire.VarintType)
			v = valueJSON{Type: sqlconn.Integer, Int: protowire.DecodeZigZag(f.val)}
		case 3:
			err = f.want(protowire.Fixed64Type)
			v = valueJSON{Type: sqlconn.Float, Float: math.Float64frombits(f.val)}
		case 4:
			var s string
			s, err = f.str()
			v = valueJSON{Type: sqlconn.Text, Text: s}
		case 5:
			err = f.want(protowire.BytesType)
			v = valueJSON{Type: sqlconn.Blob, Blob: append([]byte{}, f.raw...)}
		default:
			return nil
		}
		set = true
		return err
	})
	if err == nil && !set {
		err = errValueWithoutType
	}
	return v, err
}

func pbDecodeBatch(b []byte) (*batchJSON, error) {
	batch := &batchJSON{Steps: []batchStep{}}
	err := pbEach(b, func(f pbField) error {
		if f.num != 1 {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		var step batchStep
		hasStmt := false
		err = pbEach(m, func(f pbField) error {
			switch f.num {
			case 1:
				m, err := f.message()
				if err != nil {
					return err
				}
				c, err := pbDecodeCond(m, 0)
				step.Condition = &c
				return err
			case 2:
				m, err := f.message()
				if err != nil {
					return err
				}
				st, err := pbDecodeStmt(m)
				if err == nil {
					step.Stmt, hasStmt = *st, true
				}
				return err
			}
			return nil
		})
		if err == nil && !hasStmt {
			err = errors.New("has no stmt")
		}
		if err != nil {
			return fmt.Errorf("batch step %d: %w", len(batch.Steps), err)
		}
		batch.Steps = append(batch.Steps, step)
		return nil
	})
	return batch, err
}

func pbDecodeCond(b []byte, depth int) (batchCond, error) {
	if depth > maxCondDepth {
		return batchCond{}, fmt.Errorf("batch conditions nest deeper than %d levels", maxCondDepth)
	}
	var c batchCond // no field set: type "", which validation refuses
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1, 2:
			step, err := f.uint32()
			c = batchCond{Type: map[protowire.Number]string{1: "ok", 2: "error"}[f.num], Step: &step}
			return err
		case 3:
			m, err := f.message()
			if err != nil {
				return err
			}
			inner, err := pbDecodeCond(m, depth+1)
			c = batchCond{Type: "not", Cond: &inner}
			return err
		case 4, 5:
			m, err := f.message()
			if err != nil {
				return err
			}
			c = batchCond{Type: map[protowire.Number]string{4: "and", 5: "or"}[f.num], Conds: []batchCond{}}
			return pbEach(m, func(f pbField) error {
				if f.num != 1 {
					return nil
				}
				m, err := f.message()
				if err != nil {
					return err
				}
				inner, err := pbDecodeCond(m, depth+1)
				c.Conds = append(c.Conds, inner)
				return err
			})
		case 6:
			_, err := f.message()
			c = batchCond{Type: "is_autocommit"}
			return err
		}
		return nil
	})
	return c, err
}

// pbPipelineResp encodes a PipelineRespBody.
func pbPipelineResp(resp *pipelineRespBody) ([]byte, error) {
	w := &pbWriter{}
	w.optStr(1, resp.Baton)
	w.optStr(2, resp.BaseURL)
	for _, r := range resp.Results {
		var err error
		w.message(3, func(w *pbWriter) {
			if r.Type == "ok" {
				w.message(1, func(w *pbWriter) { err = pbStreamResponse(w, r.Response, streamResponseFields) })
			} else {
				w.message(2, func(w *pbWriter) { pbError(w, r.Error) })
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return w.b, nil
}

// streamResponseFields numbers StreamResponse's oneof (HTTP).
var streamResponseFields = map[string]protowire.Number{
	"close": 1, "execute": 2, "batch": 3, "sequence": 4, "describe": 5, "store_sql": 6, "close_sql": 7, "get_autocommit": 8,
}

// pbStreamResponse encodes a response the request executor built (the maps
// of pipeline.go) as the oneof field fields numbers its type with.
func pbStreamResponse(w *pbWriter, resp any, fields map[string]protowire.Number) error {
	var (
		typ    string
		result any
		auto   bool
	)
	switch m := resp.(type) {
	case executeResponse:
		typ, result = "execute", m.Result
		if m.Result == nil {
			return fmt.Errorf("hrana: an execute response without its result")
		}
	case map[string]string:
		typ = m["type"]
	case map[string]any:
		typ, _ = m["type"].(string)
		result = m["result"]
		auto, _ = m["is_autocommit"].(bool)
	default:
		return fmt.Errorf("hrana: no protobuf encoding for a response of type %T", resp)
	}
	num, ok := fields[typ]
	if !ok {
		return fmt.Errorf("hrana: no protobuf encoding for a %q response", typ)
	}
	var err error
	w.message(num, func(w *pbWriter) {
		switch r := result.(type) {
		case nil:
			w.boolean(1, auto) // GetAutocommitResp; the other responses without a result are empty
		case *stmtResultJSON:
			w.message(1, func(w *pbWriter) { pbStmtResult(w, r) })
		case *batchResultJSON:
			w.message(1, func(w *pbWriter) { pbBatchResult(w, r) })
		case *describeResultJSON:
			w.message(1, func(w *pbWriter) { pbDescribeResult(w, r) })
		default:
			err = fmt.Errorf("hrana: no protobuf encoding for a %q result of type %T", typ, result)
		}
	})
	return err
}

func pbError(w *pbWriter, e *Error) {
	if e == nil {
		e = &Error{Message: "unknown error"}
	}
	w.str(1, e.Message)
	if e.Code != "" {
		w.str(2, e.Code)
	}
}

func pbValue(w *pbWriter, v sqlconn.Value) {
	switch v.Type {
	case sqlconn.Integer:
		w.sint64(2, v.Int)
	case sqlconn.Float:
		w.double(3, v.Float)
	case sqlconn.Text:
		w.str(4, v.Text)
	case sqlconn.Blob:
		w.bytes(5, v.Blob)
	default:
		w.message(1, func(*pbWriter) {})
	}
}

func pbCols(w *pbWriter, num protowire.Number, cols []colJSON) {
	for _, c := range cols {
		w.message(num, func(w *pbWriter) {
			w.optStr(1, c.Name)
			w.optStr(2, c.DeclType)
		})
	}
}

func pbRow(w *pbWriter, row []valueJSON) {
	for _, v := range row {
		w.message(1, func(w *pbWriter) { pbValue(w, sqlconn.Value(v)) })
	}
}

// pbRowID writes a decimal rowid string (or a replication index) as the
// integer the protobuf schema has; nil or unparsable writes nothing.
func pbRowID(w *pbWriter, num protowire.Number, s *string) {
	if s == nil {
		return
	}
	if n, err := strconv.ParseInt(*s, 10, 64); err == nil {
		w.sint64(num, n)
	}
}

func pbStmtResult(w *pbWriter, r *stmtResultJSON) {
	pbCols(w, 1, r.Cols)
	for _, row := range r.Rows {
		w.message(2, func(w *pbWriter) { pbRow(w, row) })
	}
	w.uvarint(3, uint64(r.AffectedRowCount))
	pbRowID(w, 4, r.LastInsertRowID)
	if r.ReplicationIndex != nil {
		if n, err := strconv.ParseUint(*r.ReplicationIndex, 10, 64); err == nil {
			w.varint(5, n)
		}
	}
	w.uvarint(6, uint64(r.RowsRead))
	w.uvarint(7, uint64(r.RowsWritten))
	if r.QueryDurationMS != 0 {
		w.double(8, r.QueryDurationMS)
	}
}

// pbBatchResult writes the step results and errors as the schema's maps
// (step index to message); skipped steps have neither.
func pbBatchResult(w *pbWriter, r *batchResultJSON) {
	for i, sr := range r.StepResults {
		if sr != nil {
			w.message(1, func(w *pbWriter) {
				w.varint(1, uint64(i))
				w.message(2, func(w *pbWriter) { pbStmtResult(w, sr) })
			})
		}
	}
	for i, e := range r.StepErrors {
		if e != nil {
			w.message(2, func(w *pbWriter) {
				w.varint(1, uint64(i))
				w.message(2, func(w *pbWriter) { pbError(w, e) })
			})
		}
	}
}

func pbDescribeResult(w *pbWriter, r *describeResultJSON) {
	for _, p := range r.Params {
		w.message(1, func(w *pbWriter) { w.optStr(1, p.Name) })
	}
	for _, c := range r.Cols {
		w.message(2, func(w *pbWriter) {
			w.str(1, c.Name)
			w.optStr(2, c.DeclType)
		})
	}
	w.boolean(3, r.IsExplain)
	w.boolean(4, r.IsReadonly)
}
