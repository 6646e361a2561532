package proto

import (
	"encoding/json"
	"strconv"

	"github.com/sluicedb/sluice/server/sqlconn"
)

// CursorEntry is one entry of a cursor (Hrana 3's CursorEntry): the results
// of a batch, step by step and row by row.
type CursorEntry struct {
	Type     string // step_begin, row, step_end, step_error or error
	Step     uint32
	Cols     []Col   // step_begin
	Row      []Value // row
	Affected int64   // step_end
	RowID    *string // step_end
	Err      *Error  // step_error, error
	// Lines, of Type "rows", are the step's row entries already encoded as
	// JSON lines (StmtResult.RowsJSON of a JSON cursor), written as they are.
	Lines []byte
}

// CursorEntries turns a batch's outcome into cursor entries; failed (the
// whole batch failed) becomes the one and last error entry.
func CursorEntries(res *BatchResult, failed *Error) []CursorEntry {
	var out []CursorEntry
	EachCursorEntry(res, failed, func(e CursorEntry) error {
		out = append(out, e)
		return nil
	})
	return out
}

// EachCursorEntry hands a batch's outcome to fn entry by entry, as
// CursorEntries lists them, without a list: an answer written as it is
// made. Each row is let go once fn took it, so the rows still held shrink
// as the answer goes out. It stops at fn's first error.
func EachCursorEntry(res *BatchResult, failed *Error, fn func(CursorEntry) error) error {
	if failed != nil {
		return fn(CursorEntry{Type: "error", Err: failed})
	}
	for i := range res.StepResults {
		step := uint32(i)
		if err := res.StepErrors[i]; err != nil {
			if e := fn(CursorEntry{Type: "step_error", Step: step, Err: err}); e != nil {
				return e
			}
			continue
		}
		sr := res.StepResults[i]
		if sr == nil {
			continue // skipped by its condition
		}
		if e := fn(CursorEntry{Type: "step_begin", Step: step, Cols: sr.Cols}); e != nil {
			return e
		}
		if sr.RowsJSON != nil {
			lines := sr.RowsJSON
			sr.RowsJSON = nil // let go once written
			if e := fn(CursorEntry{Type: "rows", Lines: lines}); e != nil {
				return e
			}
		}
		for j, row := range sr.Rows {
			if e := fn(CursorEntry{Type: "row", Row: row}); e != nil {
				return e
			}
			sr.Rows[j] = nil
		}
		if e := fn(CursorEntry{Type: "step_end", Affected: sr.AffectedRowCount, RowID: sr.LastInsertRowID}); e != nil {
			return e
		}
	}
	return nil
}

// AppendJSON appends e as one line of a JSON cursor answer (with its
// newline), as encoding/json's Encoder would write MarshalJSON's object
// (keys in another order); "rows" appends its lines.
func (e CursorEntry) AppendJSON(b []byte) []byte {
	switch e.Type {
	case "rows":
		return append(b, e.Lines...)
	case "row":
		b = append(b, `{"type":"row","row":[`...)
		for i, v := range e.Row {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, sqlconn.Value(v))
		}
		return append(b, "]}\n"...)
	case "step_end":
		b = append(b, `{"affected_row_count":`...)
		b = strconv.AppendInt(b, e.Affected, 10)
		b = append(b, `,"last_insert_rowid":`...)
		b = appendStringOrNull(b, e.RowID)
		return append(b, ",\"type\":\"step_end\"}\n"...)
	}
	one, err := e.MarshalJSON()
	if err != nil { // an Error or a Col never fails to marshal
		one = []byte(`{"type":"error","error":{"message":"the cursor entry could not be encoded","code":"INTERNAL_ERROR"}}`)
	}
	b = append(b, one...)
	return append(b, '\n')
}

func (e CursorEntry) MarshalJSON() ([]byte, error) {
	switch e.Type {
	case "step_begin":
		return json.Marshal(map[string]any{"type": e.Type, "step": e.Step, "cols": e.Cols})
	case "row":
		return json.Marshal(map[string]any{"type": e.Type, "row": e.Row})
	case "step_end":
		return json.Marshal(map[string]any{"type": e.Type, "affected_row_count": e.Affected, "last_insert_rowid": e.RowID})
	case "step_error":
		return json.Marshal(map[string]any{"type": e.Type, "step": e.Step, "error": e.Err})
	}
	return json.Marshal(map[string]any{"type": "error", "error": e.Err})
}
