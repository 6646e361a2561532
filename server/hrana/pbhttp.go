package hrana

import (
	"github.com/sluicedb/sluice/server/dberr"
	"net/http"

	"github.com/sluicedb/sluice/server/dbhost"
	"google.golang.org/protobuf/encoding/protowire"
)

// Hrana 3 over HTTP with the protobuf encoding: the same pipeline and cursor
// as the JSON endpoints, other bodies.

const protobufContentType = "application/x-protobuf"

func (h *Handler) servePipelineProtobuf(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	data, e := h.readBody(w, r)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	body, err := pbDecodePipelineReq(data)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, &Error{Code: dberr.CodeProtocolError, Message: "request body is not a Hrana protobuf PipelineReqBody: " + err.Error()})
		return nil
	}
	return h.runPipeline(w, r, db, body, false, func(w http.ResponseWriter, resp *pipelineRespBody, bm dbhost.Bookmark) {
		out, err := pbPipelineResp(resp)
		if err != nil {
			// The requests ran: say so rather than pretend nothing happened.
			h.log.Error("hrana: encoding a protobuf pipeline response failed", "err", err)
			writeHTTPError(w, http.StatusInternalServerError, &Error{Code: dberr.CodeInternalError,
				Message: "the pipeline ran but its response could not be encoded: " + err.Error()})
			return
		}
		writeProtobuf(w, out, bm)
	})
}

func (h *Handler) serveCursorProtobuf(w http.ResponseWriter, r *http.Request, db dbhost.Database) {
	data, e := h.readBody(w, r)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return
	}
	body, err := pbDecodeCursorReq(data)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, &Error{Code: dberr.CodeProtocolError, Message: "request body is not a Hrana protobuf CursorReqBody: " + err.Error()})
		return
	}
	h.runCursor(w, r, db, body, func(w http.ResponseWriter, head cursorRespBody, entries []cursorEntry) {
		// Every structure is prefixed with its length as a varint.
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
		writeProtobuf(w, out.b, 0)
	})
}

func writeProtobuf(w http.ResponseWriter, body []byte, bm dbhost.Bookmark) {
	w.Header().Set("Content-Type", protobufContentType)
	if bm > 0 {
		w.Header().Set(dbhost.BookmarkHeader, formatBookmark(bm))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
