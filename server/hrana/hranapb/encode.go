package hranapb

// Encoding the shared structures of the Hrana 3 protobuf schema from the
// types of the JSON encoding.

import (
	"fmt"
	"strconv"

	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/sqlconn"
	"google.golang.org/protobuf/encoding/protowire"
)

// EncodePipelineResponse encodes a PipelineRespBody.
func EncodePipelineResponse(resp *proto.PipelineResponse) ([]byte, error) {
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
// of server/hrana/stream's handle.go) as the oneof field fields numbers its type with.
func pbStreamResponse(w *pbWriter, resp any, fields map[string]protowire.Number) error {
	var (
		typ    string
		result any
		auto   bool
	)
	switch m := resp.(type) {
	case proto.ExecuteResponse:
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
		case *proto.StmtResult:
			w.message(1, func(w *pbWriter) { pbStmtResult(w, r) })
		case *proto.BatchResult:
			w.message(1, func(w *pbWriter) { pbBatchResult(w, r) })
		case *proto.DescribeResult:
			w.message(1, func(w *pbWriter) { pbDescribeResult(w, r) })
		default:
			err = fmt.Errorf("hrana: no protobuf encoding for a %q result of type %T", typ, result)
		}
	})
	return err
}

func pbError(w *pbWriter, e *proto.Error) {
	if e == nil {
		e = &proto.Error{Message: "unknown error"}
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

func pbCols(w *pbWriter, num protowire.Number, cols []proto.Col) {
	for _, c := range cols {
		w.message(num, func(w *pbWriter) {
			w.optStr(1, c.Name)
			w.optStr(2, c.DeclType)
		})
	}
}

func pbRow(w *pbWriter, row []proto.Value) {
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

func pbStmtResult(w *pbWriter, r *proto.StmtResult) {
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
func pbBatchResult(w *pbWriter, r *proto.BatchResult) {
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

func pbDescribeResult(w *pbWriter, r *proto.DescribeResult) {
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
func EncodeCursorResponse(head proto.CursorResponse, entries []proto.CursorEntry) []byte {
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

// pbCursorEntry encodes e as a protobuf CursorEntry.
func pbCursorEntry(w *pbWriter, e proto.CursorEntry) {
	switch e.Type {
	case "step_begin":
		w.message(1, func(w *pbWriter) {
			w.uvarint(1, uint64(e.Step))
			pbCols(w, 2, e.Cols)
		})
	case "step_end":
		w.message(2, func(w *pbWriter) {
			w.uvarint(1, uint64(e.Affected))
			pbRowID(w, 2, e.RowID)
		})
	case "step_error":
		w.message(3, func(w *pbWriter) {
			w.uvarint(1, uint64(e.Step))
			w.message(2, func(w *pbWriter) { pbError(w, e.Err) })
		})
	case "row":
		w.message(4, func(w *pbWriter) { pbRow(w, e.Row) })
	default:
		w.message(5, func(w *pbWriter) { pbError(w, e.Err) })
	}
}
