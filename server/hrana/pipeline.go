package hrana

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"

	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
)

func (h *Handler) servePipeline(w http.ResponseWriter, r *http.Request, db dbhost.Database) error {
	if r.ContentLength > longBody {
		// Reading and decoding a large body is long work too (lane.go).
		release, ok := h.enterLongLane(w, r, longPipeline+1)
		if !ok {
			return nil
		}
		defer release()
		r = r.WithContext(context.WithValue(r.Context(), inLaneKey{}, true))
	}
	data, e := h.readBody(w, r)
	var body proto.PipelineRequest
	if e == nil {
		tooMany, err := proto.DecodePipelineRequestAtMost(data, &body, h.maxPipelineStatements())
		if tooMany {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, pipelineTooLong(fmt.Sprintf("more than %d", h.maxPipelineStatements()), h.maxPipelineStatements()))
			return nil
		}
		e = notHranaJSON(err)
	}
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	return h.runPipeline(w, r, db, &body, true, writePipeline)
}

// runPipeline runs a pipeline's requests on its stream; answer writes the
// response in the request's encoding (errors before anything ran are JSON,
// the only error body the clients parse). streamRows: answer is
// writePipeline, which writes rows encoded as SQLite stepped them; else
// the answer is protobuf. Every statement's rows count toward one answer
// budget (limits.max-response-bytes): the statement that would pass it is
// stopped and answered SQLITE_TOOBIG, the others are answered as usual. On a
// read replica that refused a write or a session it stops, answers nothing
// and returns the *followers.NeedsWriterError (see ServeRead).
func (h *Handler) runPipeline(w http.ResponseWriter, r *http.Request, db dbhost.Database, body *proto.PipelineRequest,
	streamRows bool, answer func(http.ResponseWriter, *proto.PipelineResponse, dbhost.Bookmark)) error {
	if max, n := h.maxPipelineStatements(), statementCount(body.Requests); n > max {
		// Every statement's result is kept until the answer is written: a
		// body of tiny statements would cost memory and CPU out of all
		// proportion to its size, beside everyone else's requests.
		writeHTTPError(w, http.StatusRequestEntityTooLarge, pipelineTooLong(strconv.Itoa(n), max))
		return nil
	}
	for i := range body.Requests {
		if e := body.Requests[i].Validate(); e != nil {
			e.Message = fmt.Sprintf("request %d: %s", i, e.Message)
			writeHTTPError(w, http.StatusBadRequest, e)
			return nil
		}
	}
	if r.Context().Value(inLaneKey{}) == nil {
		release, ok := h.enterLongLane(w, r, statementCount(body.Requests))
		if !ok {
			return nil
		}
		defer release()
	}
	ctx, idem, e := requestContext(r, body.Requests)
	if e != nil {
		writeHTTPError(w, http.StatusBadRequest, e)
		return nil
	}
	// A pipeline that ends with close never keeps its stream, so it needs
	// no slot of the stream quotas (one-shot queries work at any load).
	n := len(body.Requests)
	oneShot := n > 0 && body.Requests[n-1].Type == "close"
	s, refusal, e := h.streams.Acquire(body.Baton, db, ownerFrom(r.Context()), oneShot)
	if e != nil {
		writeHTTPError(w, refusalStatus(refusal), e)
		return nil
	}
	released := false
	defer h.endOnPanic(w, s, &released)
	x, cancel := h.streams.NewExecution(stream.WithClient(ctx, r.RemoteAddr), s)
	defer cancel()
	x.StreamRows = streamRows
	if !streamRows { // the protobuf encoding: rows are sized in it
		protobufBudget(x.Budget())
	}
	resp := proto.PipelineResponse{Results: make([]proto.StreamResult, 0, len(body.Requests))}
	long := len(body.Requests) > longPipeline
	for i := range body.Requests {
		if long && i%16 == 15 {
			runtime.Gosched() // a short request waiting for this core goes first (lane.go)
		}
		resp.Results = append(resp.Results, x.Handle(&body.Requests[i]))
		if x.NeedsWriter() != nil {
			break
		}
	}
	if err := x.NeedsWriter(); err != nil {
		h.streams.Drop(s) // the writer runs the request; nothing of it stays here
		released = true
		return err
	}
	resp.Baton, released = h.streams.Release(s), true
	markReplayed(w, idem)
	answer(w, &resp, x.Bookmark())
	return nil
}

// refusalStatus is the HTTP status that answers a refused baton.
func refusalStatus(r stream.Refusal) int {
	switch r {
	case stream.RefusedForbidden:
		return http.StatusForbidden
	case stream.RefusedQuota:
		return http.StatusTooManyRequests
	case stream.RefusedInternal:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// pipelineTooLong refuses a pipeline of n statements (a number, or "more than max").
func pipelineTooLong(n string, max int) *proto.Error {
	return &proto.Error{Code: "PIPELINE_TOO_LONG", Message: fmt.Sprintf(
		"the pipeline holds %s statements (execute requests and batch steps), more than %d (limits.max-pipeline-statements); send them in several pipelines", n, max)}
}

// statementCount counts the results a pipeline's answer holds: one per
// request, one per step of a batch.
func statementCount(reqs []proto.StreamRequest) int {
	n := 0
	for _, r := range reqs {
		if r.Batch != nil {
			n += len(r.Batch.Steps)
		} else {
			n++
		}
	}
	return n
}

// DefaultMaxPipelineStatements bounds the statements of one pipeline unless
// configured: far more than any client sends at once, and a few megabytes
// of results at most.
const DefaultMaxPipelineStatements = 10_000

func (h *Handler) maxPipelineStatements() int {
	if h.cfg.MaxPipelineStatements > 0 {
		return h.cfg.MaxPipelineStatements
	}
	return DefaultMaxPipelineStatements
}
