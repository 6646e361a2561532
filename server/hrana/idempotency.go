package hrana

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/hrana/proto"
	"github.com/sluicedb/sluice/server/hrana/stream"
)

// Idempotency-Key on Hrana's HTTP requests: the key applies to the writes the
// request makes (each write of a pipeline in order: key, "key 2", ...); reads
// ignore it. dbhost stores each write's outcome with the write and replays
// it for a retry.

const (
	idempotencyKeyHeader = "Idempotency-Key"
	replayedHeader       = "Idempotent-Replayed"
)

// requestContext returns r's context carrying the request's key, if it has
// one; request is what a retry must repeat (the statements, not the baton).
func requestContext(r *http.Request, request any) (context.Context, *groupcommit.Idempotency, *proto.Error) {
	key, ok := r.Header[idempotencyKeyHeader]
	if !ok {
		return r.Context(), nil, nil
	}
	raw, err := json.Marshal(request)
	if err != nil {
		return nil, nil, &proto.Error{Code: dberr.CodeProtocolError, Message: "cannot encode the request for its Idempotency-Key: " + err.Error()}
	}
	k, err := groupcommit.NewIdempotency(strings.Join(key, ","), raw)
	if err != nil {
		return nil, nil, stream.ToError(err, "")
	}
	return groupcommit.WithIdempotency(r.Context(), k), k, nil
}

// markReplayed tells the client that (part of) the answer is a replay.
func markReplayed(w http.ResponseWriter, k *groupcommit.Idempotency) {
	if k != nil && k.Replayed() {
		w.Header().Set(replayedHeader, "true")
	}
}
