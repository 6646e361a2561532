package proto

import "encoding/json"

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
}

// CursorEntries turns a batch's outcome into cursor entries; failed (the
// whole batch failed) becomes the one and last error entry.
func CursorEntries(res *BatchResult, failed *Error) []CursorEntry {
	if failed != nil {
		return []CursorEntry{{Type: "error", Err: failed}}
	}
	var out []CursorEntry
	for i := range res.StepResults {
		step := uint32(i)
		if err := res.StepErrors[i]; err != nil {
			out = append(out, CursorEntry{Type: "step_error", Step: step, Err: err})
			continue
		}
		sr := res.StepResults[i]
		if sr == nil {
			continue // skipped by its condition
		}
		out = append(out, CursorEntry{Type: "step_begin", Step: step, Cols: sr.Cols})
		for _, row := range sr.Rows {
			out = append(out, CursorEntry{Type: "row", Row: row})
		}
		out = append(out, CursorEntry{Type: "step_end", Affected: sr.AffectedRowCount, RowID: sr.LastInsertRowID})
	}
	return out
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
