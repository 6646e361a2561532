package restore

import (
	"context"
	"log/slog"

	"github.com/sluicedb/sluice/replica"
)

// dropInFlight leaves out, for a restore of the newest state, the level-0
// files past a gap that can only be uploads in flight of a writer that did
// not land an earlier TXID (replica.InFlightTail): none of them was
// acknowledged, so the history ends before the gap. That holds only while
// the replica's writer lease is not released (replica.LeaseOpen): after a
// release, or without a lease, every gap is damage. The gap is said in one
// line; a gap that is not such a tail stays in and fails the plan as damage.
func dropInFlight(ctx context.Context, levels [][]replica.LTXFile, store replica.Store, opts Options) ([][]replica.LTXFile, error) {
	end, tail := replica.InFlightTail(levels)
	if len(tail) == 0 {
		return levels, nil
	}
	if open, err := replica.LeaseOpen(ctx, store); err != nil || !open {
		return levels, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Info("the replica's newest files continue a TXID that never landed (uploads in flight when their writer stopped, never acknowledged); restoring the history up to the gap",
		"replica", store.String(), "txid", uint64(end), "missing_txid", uint64(end)+1,
		"first_ignored", tail[0].Key, "ignored", len(tail))
	skip := make(map[string]bool, len(tail))
	for _, f := range tail {
		skip[f.Key] = true
	}
	out := make([][]replica.LTXFile, len(levels))
	copy(out, levels)
	var l0 []replica.LTXFile
	for _, f := range levels[0] {
		if !skip[f.Key] {
			l0 = append(l0, f)
		}
	}
	out[0] = l0
	return out, nil
}
