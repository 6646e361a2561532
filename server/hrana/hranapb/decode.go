package hranapb

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
	"google.golang.org/protobuf/encoding/protowire"
)

// The shared structures of the Hrana 3 protobuf schema (https://github.com/tursodatabase/libsql/blob/main/docs/HRANA_3_SPEC.md,
// "Shared structures" and "Hrana over HTTP"), decoded into the types of the
// JSON encoding (encode.go encodes them).

// DecodePipelineRequest decodes a protobuf PipelineReqBody.
func DecodePipelineRequest(b []byte) (*proto.PipelineRequest, error) {
	body := &proto.PipelineRequest{}
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

// DecodeCursorRequest decodes a protobuf CursorReqBody.
func DecodeCursorRequest(b []byte) (*proto.CursorRequest, error) {
	body := &proto.CursorRequest{}
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

func pbDecodeStreamRequest(b []byte) (proto.StreamRequest, error) {
	var req proto.StreamRequest
	err := pbEach(b, func(f pbField) error {
		typ, ok := streamRequestTypes[f.num]
		if !ok {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		req = proto.StreamRequest{Type: typ} // a oneof: the last one wins
		return pbDecodeRequestFields(m, &req, 0)
	})
	return req, err
}

// pbDecodeRequestFields decodes the body of one stream request (HTTP) or
// WebSocket request into req. Field numbers start after first (the
// WebSocket requests put stream_id first).
func pbDecodeRequestFields(b []byte, req *proto.StreamRequest, first protowire.Number) error {
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

func pbDecodeStmt(b []byte) (*proto.Stmt, error) {
	st := &proto.Stmt{}
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

func pbDecodeNamedArg(b []byte) (proto.NamedArg, error) {
	var a proto.NamedArg
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

func pbDecodeValue(b []byte) (proto.Value, error) {
	var v proto.Value
	set := false
	err := pbEach(b, func(f pbField) error {
		var err error
		switch f.num {
		case 1:
			_, err = f.message()
			v = proto.Value{Type: sqlconn.Null}
		case 2:
			err = f.want(protowire.VarintType)
			v = proto.Value{Type: sqlconn.Integer, Int: protowire.DecodeZigZag(f.val)}
		case 3:
			err = f.want(protowire.Fixed64Type)
			v = proto.Value{Type: sqlconn.Float, Float: math.Float64frombits(f.val)}
		case 4:
			var s string
			s, err = f.str()
			v = proto.Value{Type: sqlconn.Text, Text: s}
		case 5:
			err = f.want(protowire.BytesType)
			v = proto.Value{Type: sqlconn.Blob, Blob: append([]byte{}, f.raw...)}
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

func pbDecodeBatch(b []byte) (*proto.Batch, error) {
	batch := &proto.Batch{Steps: []proto.BatchStep{}}
	err := pbEach(b, func(f pbField) error {
		if f.num != 1 {
			return nil
		}
		m, err := f.message()
		if err != nil {
			return err
		}
		var step proto.BatchStep
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

func pbDecodeCond(b []byte, depth int) (proto.BatchCond, error) {
	if depth > maxCondDepth {
		return proto.BatchCond{}, fmt.Errorf("batch conditions nest deeper than %d levels", maxCondDepth)
	}
	var c proto.BatchCond // no field set: type "", which validation refuses
	err := pbEach(b, func(f pbField) error {
		switch f.num {
		case 1, 2:
			step, err := f.uint32()
			c = proto.BatchCond{Type: map[protowire.Number]string{1: "ok", 2: "error"}[f.num], Step: &step}
			return err
		case 3:
			m, err := f.message()
			if err != nil {
				return err
			}
			inner, err := pbDecodeCond(m, depth+1)
			c = proto.BatchCond{Type: "not", Cond: &inner}
			return err
		case 4, 5:
			m, err := f.message()
			if err != nil {
				return err
			}
			c = proto.BatchCond{Type: map[protowire.Number]string{4: "and", 5: "or"}[f.num], Conds: []proto.BatchCond{}}
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
			c = proto.BatchCond{Type: "is_autocommit"}
			return err
		}
		return nil
	})
	return c, err
}
