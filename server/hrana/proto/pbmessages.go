package proto

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

func DecodePipelineRequest(b []byte) (*PipelineRequest, error) {
	body := &PipelineRequest{}
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
			req, err := DecodeStreamRequest(m)
			if err != nil {
				return fmt.Errorf("request %d: %w", len(body.Requests), err)
			}
			body.Requests = append(body.Requests, req)
		}
		return nil
	})
	return body, err
}

func DecodeCursorRequest(b []byte) (*CursorRequest, error) {
	body := &CursorRequest{}
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
			body.Batch, err = DecodeBatch(m)
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

func DecodeStreamRequest(b []byte) (StreamRequest, error) {
	var req StreamRequest
	err := pbEach(b, func(f pbField) error {
		typ, ok := streamRequestTypes[f.num]
		if !ok {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		req = StreamRequest{Type: typ} // a oneof: the last one wins
		return pbDecodeRequestFields(m, &req, 0)
	})
	return req, err
}

// pbDecodeRequestFields decodes the body of one stream request (HTTP) or
// WebSocket request into req. Field numbers start after first (the
// WebSocket requests put stream_id first).
func pbDecodeRequestFields(b []byte, req *StreamRequest, first protowire.Number) error {
	return pbEach(b, func(f pbField) error {
		var err error
		switch req.Type {
		case "execute":
			if f.num == first+1 {
				var m []byte
				if m, err = f.message(); err == nil {
					req.Stmt, err = DecodeStmt(m)
				}
			}
		case "batch":
			if f.num == first+1 {
				var m []byte
				if m, err = f.message(); err == nil {
					req.Batch, err = DecodeBatch(m)
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

func DecodeStmt(b []byte) (*Stmt, error) {
	st := &Stmt{}
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
			v, err := DecodeValue(m)
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

func pbDecodeNamedArg(b []byte) (NamedArg, error) {
	var a NamedArg
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
			a.Value, err = DecodeValue(m)
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

func DecodeValue(b []byte) (Value, error) {
	var v Value
	set := false
	err := pbEach(b, func(f pbField) error {
		var err error
		switch f.num {
		case 1:
			_, err = f.message()
			v = Value{Type: sqlconn.Null}
		case 2:
			err = f.want(protowire.VarintType)
			v = Value{Type: sqlconn.Integer, Int: protowire.DecodeZigZag(f.val)}
		case 3:
			err = f.want(protowire.Fixed64Type)
			v = Value{Type: sqlconn.Float, Float: math.Float64frombits(f.val)}
		case 4:
			var s string
			s, err = f.str()
			v = Value{Type: sqlconn.Text, Text: s}
		case 5:
			err = f.want(protowire.BytesType)
			v = Value{Type: sqlconn.Blob, Blob: append([]byte{}, f.raw...)}
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

func DecodeBatch(b []byte) (*Batch, error) {
	batch := &Batch{Steps: []BatchStep{}}
	err := pbEach(b, func(f pbField) error {
		if f.num != 1 {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		var step BatchStep
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
				st, err := DecodeStmt(m)
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

func pbDecodeCond(b []byte, depth int) (BatchCond, error) {
	if depth > MaxCondDepth {
		return BatchCond{}, fmt.Errorf("batch conditions nest deeper than %d levels", MaxCondDepth)
	}
	var c BatchCond // no field set: type "", which validation refuses
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1, 2:
			step, err := f.uint32()
			c = BatchCond{Type: map[protowire.Number]string{1: "ok", 2: "error"}[f.num], Step: &step}
			return err
		case 3:
			m, err := f.message()
			if err != nil {
				return err
			}
			inner, err := pbDecodeCond(m, depth+1)
			c = BatchCond{Type: "not", Cond: &inner}
			return err
		case 4, 5:
			m, err := f.message()
			if err != nil {
				return err
			}
			c = BatchCond{Type: map[protowire.Number]string{4: "and", 5: "or"}[f.num], Conds: []BatchCond{}}
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
			c = BatchCond{Type: "is_autocommit"}
			return err
		}
		return nil
	})
	return c, err
}

// EncodePipelineResponse encodes a PipelineRespBody.
func EncodePipelineResponse(resp *PipelineResponse) ([]byte, error) {
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
	case ExecuteResponse:
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
		case *StmtResult:
			w.message(1, func(w *pbWriter) { pbStmtResult(w, r) })
		case *BatchResult:
			w.message(1, func(w *pbWriter) { pbBatchResult(w, r) })
		case *DescribeResult:
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

func pbCols(w *pbWriter, num protowire.Number, cols []Col) {
	for _, c := range cols {
		w.message(num, func(w *pbWriter) {
			w.optStr(1, c.Name)
			w.optStr(2, c.DeclType)
		})
	}
}

func pbRow(w *pbWriter, row []Value) {
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

func pbStmtResult(w *pbWriter, r *StmtResult) {
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
func pbBatchResult(w *pbWriter, r *BatchResult) {
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

func pbDescribeResult(w *pbWriter, r *DescribeResult) {
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

// EncodeCursorResponse encodes a protobuf cursor answer: the CursorRespBody
// and then every CursorEntry, each prefixed with its length as a varint.
func EncodeCursorResponse(head CursorResponse, entries []CursorEntry) []byte {
	out := &pbWriter{}
	delimited := func(body func(w *pbWriter)) {
		msg := &pbWriter{}
		body(msg)
		out.b = protowire.AppendVarint(out.b, uint64(len(msg.b)))
		out.b = append(out.b, msg.b...)
	}
	delimited(func(w *pbWriter) {
		w.optStr(1, head.Baton)
		w.optStr(2, head.BaseURL)
	})
	for _, e := range entries {
		delimited(func(w *pbWriter) { pbCursorEntry(w, e) })
	}
	return out.b
}
