package hrana

import (
	"encoding/json"
	"net/http"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"

	"github.com/sluicedb/sluice/server/dbhost"
)

// serveCursor answers POST /v3/cursor: a batch whose results go out as
// newline-delimited entries. The batch runs to completion first (results are
// bounded by the request size limits of the statements themselves), then the
// entries are written.
func (h *Handler) serveCursor(w http.ResponseWriter, r *http.Request, db dbhost.Database) {
	var body proto.CursorRequest
	if e := h.decodeBody(w, r, &body); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return
	}
	h.runCursor(w, r, db, &body, func(w http.ResponseWriter, head proto.CursorResponse, entries []proto.CursorEntry) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w) // Encode ends every entry with a newline
		_ = enc.Encode(head)
		for _, e := range entries {
			_ = enc.Encode(e)
		}
	})
}

// runCursor runs a cursor request's batch on its stream and hands the
// answer's head and entries to answer, in the request's encoding.
func (h *Handler) runCursor(w http.ResponseWriter, r *http.Request, db dbhost.Database, body *proto.CursorRequest,
	answer func(http.ResponseWriter, proto.CursorResponse, []proto.CursorEntry)) {
	if body.Batch == nil {
		writeHTTPError(w, http.StatusBadRequest, &proto.Error{Code: dberr.CodeProtocolError, Message: "cursor needs a batch"})
		return
	}
	if e := body.Batch.Validate(); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return
	}
	s, refusal, e := h.streams.Acquire(body.Baton, db, ownerFrom(r.Context()), false)
	if e != nil {
		writeHTTPError(w, refusalStatus(refusal), e)
		return
	}
	released := false
	defer h.endOnPanic(w, s, &released)
	x, cancel := h.streams.NewExecution(stream.WithClient(r.Context(), r.RemoteAddr), s)
	defer cancel()
	entries := x.Cursor(body.Batch)
	baton := h.streams.Release(s)
	released = true
	if bm := x.Bookmark(); bm > 0 {
		w.Header().Set(dbhost.BookmarkHeader, formatBookmark(bm))
	}
	answer(w, proto.CursorResponse{Baton: baton}, entries)
}
