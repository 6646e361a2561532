package stream

import (
	"context"
	"encoding/json"

	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// Idempotency-Key (read from the HTTP request by the handler): dbhost
// stores each keyed write's outcome with the write and replays it for a
// retry.

// storedOutcome is the answer of one keyed write group.
type storedOutcome struct {
	Results []*proto.StmtResult `json:"results"`
	Errs    []*proto.Error      `json:"errs"`
}

// keyOutcome makes the next write of ctx's key store and replay *out.
func keyOutcome(ctx context.Context, out *outcome) {
	k := groupcommit.IdempotencyFrom(ctx)
	if k == nil {
		return
	}
	k.Save = func() ([]byte, error) { return json.Marshal(storedOutcome{out.results, out.errs}) }
	k.Load = func(b []byte) error {
		var s storedOutcome
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		out.results, out.errs = s.Results, s.Errs
		return nil
	}
}
