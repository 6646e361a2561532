package hrana

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
	"github.com/sluicedb/sluice/server/httperr"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
)

// Hrana 1 over HTTP (libSQL's https://github.com/tursodatabase/libsql/blob/main/docs/HTTP_V1_SPEC.md), which libsql-client for Python uses:
// each request runs on a fresh stream that is closed afterwards.

type v1ExecuteReq struct {
	Stmt *proto.Stmt `json:"stmt"`
}

type v1BatchReq struct {
	Batch *proto.Batch `json:"batch"`
}

func (h *Handler) serveV1Execute(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	var body v1ExecuteReq
	if e := h.decodeBody(w, r, &body); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	if body.Stmt == nil {
		writeHTTPError(w, http.StatusBadRequest, &proto.Error{Code: dberr.CodeProtocolError, Message: "execute needs a stmt"})
		return nil
	}
	x, idem, cancel, e := h.oneShot(r, db, body.Stmt)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	defer cancel()
	released := false
	defer h.endOnPanic(w, x.Stream(), &released)
	defer x.EndSession()
	res, e := x.Execute(body.Stmt)
	if err := x.NeedsWriter(); err != nil {
		return err // answered by the writer (ServeRead)
	}
	markReplayed(w, idem)
	if e != nil {
		writeHTTPError(w, httperr.V1StatementStatus(e.Code), e)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res}, x.Bookmark())
	return nil
}

func (h *Handler) serveV1Batch(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	var body v1BatchReq
	if e := h.decodeBody(w, r, &body); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	if body.Batch == nil {
		writeHTTPError(w, http.StatusBadRequest, &proto.Error{Code: dberr.CodeProtocolError, Message: "batch needs a batch"})
		return nil
	}
	if e := body.Batch.Validate(); e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	x, idem, cancel, e := h.oneShot(r, db, body.Batch)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	defer cancel()
	released := false
	defer h.endOnPanic(w, x.Stream(), &released)
	defer x.EndSession()
	res, e := x.Batch(body.Batch)
	if err := x.NeedsWriter(); err != nil {
		return err // answered by the writer (ServeRead)
	}
	markReplayed(w, idem)
	if e != nil {
		writeHTTPError(w, httperr.V1StatementStatus(e.Code), e)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res}, x.Bookmark())
	return nil
}

// oneShot makes an unregistered stream for one v1 request; the caller ends
// any session it leaves open (rolling back an unfinished transaction).
// request is what the request's Idempotency-Key covers.
func (h *Handler) oneShot(r *http.Request, db dbhost.Database, request any) (*stream.Execution, *groupcommit.Idempotency, context.CancelFunc, *proto.Error) {
	ctx, idem, e := requestContext(r, request)
	if e != nil {
		return nil, nil, func() {}, e
	}
	x, cancel := h.streams.NewExecution(ctx, stream.OneShot(db, ownerFrom(r.Context())))
	return x, idem, cancel, nil
}

func formatBookmark(bm dbhost.Bookmark) string { return strconv.FormatUint(uint64(bm), 10) }
