package hrana

import (
	"encoding/json"
	"net/http"

	"github.com/sluicedb/sluice/server/dbhost"
)

// serveCursor answers POST /v3/cursor: a batch whose results go out as
// newline-delimited entries. The batch runs to completion first (results are
// bounded by the request size limits of the statements themselves), then the
// entries are written.
func (h *Handler) serveCursor(w http.ResponseWriter, r *http.Request, db dbhost.Database) {
	var body cursorReqBody
	if e := decodeBody(w, r, &body); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return
	}
	if body.Batch == nil {
		writeHTTPError(w, http.StatusBadRequest, &Error{Code: "PROTOCOL_ERROR", Message: "cursor needs a batch"})
		return
	}
	if e := validateBatch(body.Batch); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return
	}
	s, status, e := h.acquire(body.Baton, db, ownerFrom(r.Context()), false)
	if e != nil {
		writeHTTPError(w, status, e)
		return
	}
	x, cancel := h.newExecution(r.Context(), s)
	defer cancel()
	x.rowsAsValues = true
	var (
		res    *batchResultJSON
		failed *Error
	)
	switch {
	case s.dead != nil:
		failed = s.dead
	default:
		res, failed = x.batch(body.Batch)
	}
	baton := h.release(s)

	w.Header().Set("Content-Type", "application/json")
	if x.bookmark > 0 {
		w.Header().Set("Sluice-Bookmark", formatBookmark(x.bookmark))
	}
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w) // Encode ends every entry with a newline
	_ = enc.Encode(cursorRespBody{Baton: baton})
	if failed != nil {
		_ = enc.Encode(map[string]any{"type": "error", "error": failed})
		return
	}
	for i := range res.StepResults {
		if err := res.StepErrors[i]; err != nil {
			_ = enc.Encode(map[string]any{"type": "step_error", "step": i, "error": err})
			continue
		}
		sr := res.StepResults[i]
		if sr == nil {
			continue // skipped by its condition
		}
		_ = enc.Encode(map[string]any{"type": "step_begin", "step": i, "cols": sr.Cols})
		for _, row := range sr.Rows {
			_ = enc.Encode(map[string]any{"type": "row", "row": row})
		}
		_ = enc.Encode(map[string]any{"type": "step_end", "affected_row_count": sr.AffectedRowCount,
			"last_insert_rowid": sr.LastInsertRowID})
	}
}
