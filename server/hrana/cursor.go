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
// newline-delimited entries.
func (h *Handler) serveCursor(w http.ResponseWriter, r *http.Request, db dbhost.Database) {
	var body proto.CursorRequest
	if e := h.decodeBody(w, r, &body); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return
	}
	h.runCursor(w, r, db, &body, cursorJSON{})
}

// cursorEncoding writes a cursor answer's head and entries in the
// request's encoding.
type cursorEncoding interface {
	contentType() string
	head(b []byte, head proto.CursorResponse) []byte
	entry(b []byte, e proto.CursorEntry) []byte
	// prepare sets how the execution keeps rows for this encoding and
	// sizes them for the answer budget.
	prepare(x *stream.Execution)
}

type cursorJSON struct{}

func (cursorJSON) contentType() string { return "application/json" }
func (cursorJSON) head(b []byte, head proto.CursorResponse) []byte {
	one, _ := json.Marshal(head) // two strings: never fails
	return append(append(b, one...), '\n')
}
func (cursorJSON) entry(b []byte, e proto.CursorEntry) []byte { return e.AppendJSON(b) }

// prepare has rows encoded as their entries while SQLite steps them.
func (cursorJSON) prepare(x *stream.Execution) { x.StreamRows, x.RowLines = true, true }

// cursorPiece is how much of a cursor answer is encoded before it is
// written: the answer goes out as it is encoded, each piece under the
// server's write deadline (a client that stops reading is dropped), so
// what a request holds beyond its batch's results is one piece.
const cursorPiece = 32 << 10

// runCursor runs a cursor request's batch on its stream, then writes its
// head and entries in enc as they are encoded. The batch's results (its
// rows capped by the answer budget, limits.max-response-bytes: a step
// past it is a step_error naming the limit) are held until written, each
// row let go once encoded. The batch runs to its end before the first
// entry goes out, since it may hold the database's writer: a client that
// reads slowly must never hold it.
func (h *Handler) runCursor(w http.ResponseWriter, r *http.Request, db dbhost.Database, body *proto.CursorRequest, enc cursorEncoding) {
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
	enc.prepare(x)
	res, failed := x.CursorBatch(body.Batch)
	baton := h.streams.Release(s)
	released = true
	w.Header().Set("Content-Type", enc.contentType())
	if bm := x.Bookmark(); bm > 0 {
		w.Header().Set(dbhost.BookmarkHeader, formatBookmark(bm))
	}
	w.WriteHeader(http.StatusOK)
	b := make([]byte, 0, cursorPiece+cursorPiece/4)
	b = enc.head(b, proto.CursorResponse{Baton: baton})
	err := proto.EachCursorEntry(res, failed, func(e proto.CursorEntry) error {
		if e.Type == "rows" && len(e.Lines) >= cursorPiece {
			// A step's rows, encoded as SQLite stepped them: written as they are.
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
			_, err := w.Write(e.Lines)
			return err
		}
		if b = enc.entry(b, e); len(b) < cursorPiece {
			return nil
		}
		_, err := w.Write(b)
		b = b[:0]
		return err // the client went away or stopped reading: nothing more to write
	})
	if err == nil && len(b) > 0 {
		w.Write(b)
	}
}
