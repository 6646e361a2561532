package hrana

import (
	"net/http"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/hrana/hranapb"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"

	"github.com/sluicedb/sluice/server/dbhost"
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
	body, err := hranapb.DecodePipelineRequest(data)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, &proto.Error{Code: dberr.CodeProtocolError, Message: "request body is not a Hrana protobuf PipelineReqBody: " + err.Error()})
		return nil
	}
	return h.runPipeline(w, r, db, body, false, func(w http.ResponseWriter, resp *proto.PipelineResponse, bm dbhost.Bookmark) {
		out, err := hranapb.EncodePipelineResponse(resp)
		if err != nil {
			// The requests ran: say so rather than pretend nothing happened.
			h.log.Error("hrana: encoding a protobuf pipeline response failed", "err", err)
			writeHTTPError(w, http.StatusInternalServerError, &proto.Error{Code: dberr.CodeInternalError,
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
	body, err := hranapb.DecodeCursorRequest(data)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, &proto.Error{Code: dberr.CodeProtocolError, Message: "request body is not a Hrana protobuf CursorReqBody: " + err.Error()})
		return
	}
	h.runCursor(w, r, db, body, &cursorProtobuf{})
}

// cursorProtobuf writes a cursor answer as length-delimited messages.
type cursorProtobuf struct{ scratch []byte }

func (*cursorProtobuf) contentType() string { return protobufContentType }
func (*cursorProtobuf) head(b []byte, head proto.CursorResponse) []byte {
	return hranapb.AppendCursorHead(b, head)
}
func (c *cursorProtobuf) entry(b []byte, e proto.CursorEntry) []byte {
	return hranapb.AppendCursorEntry(b, e, &c.scratch)
}
func (*cursorProtobuf) prepare(x *stream.Execution) { protobufBudget(x.Budget()) }

// protobufBudget sizes rows for the answer budget in the protobuf encoding.
func protobufBudget(b *proto.Budget) {
	if b != nil {
		b.Measure, b.RowOverhead = hranapb.ValueSize, hranapb.RowOverhead
	}
}

func writeProtobuf(w http.ResponseWriter, body []byte, bm dbhost.Bookmark) {
	w.Header().Set("Content-Type", protobufContentType)
	if bm > 0 {
		w.Header().Set(dbhost.BookmarkHeader, formatBookmark(bm))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
