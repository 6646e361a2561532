package restore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Span is the range of states a replica can restore: from the oldest
// snapshot's TXID (what retention kept) to the newest TXID.
type Span struct {
	Oldest, Newest         ltx.TXID
	OldestTime, NewestTime time.Time
}

// PointError says a requested point lies outside the replica's Span: before
// the oldest restorable state, after the newest, or between two restore
// points that compaction merged. Its message names what is available.
type PointError struct {
	Span
	Reason string
}

func (e *PointError) Error() string { return e.Reason }

// ResolvePoint lists store once and turns opts' target (a TXID or a
// Timestamp; neither: the newest state) into the TXID a restore reaches,
// checked against what the replica holds. A point outside it is a
// *PointError; an empty replica matches ErrNoReplica.
func ResolvePoint(ctx context.Context, store replica.Store, opts Options) (ltx.TXID, Span, error) {
	if err := opts.validate(); err != nil {
		return 0, Span{}, err
	}
	levels, err := replica.ListAllLTX(ctx, store)
	if err != nil {
		return 0, Span{}, err
	}
	files := flatten(levels)
	if len(files) == 0 {
		return 0, Span{}, fmt.Errorf("%s: %w", store, ErrNoReplica)
	}
	var base, newest replica.LTXFile
	for _, f := range files {
		if f.MinTXID == 1 && (base.Key == "" || f.MaxTXID < base.MaxTXID) {
			base = f
		}
		if f.MaxTXID > newest.MaxTXID {
			newest = f
		}
	}
	if base.Key == "" {
		_, err := planSorted(files, 0) // words the missing snapshot
		return 0, Span{}, fmt.Errorf("plan restore from %s: %w", store, err)
	}
	span := Span{Oldest: base.MaxTXID, Newest: newest.MaxTXID}
	hdrs, err := readHeaders(ctx, store, []replica.LTXFile{base, newest}, 2)
	if err != nil {
		return 0, span, err
	}
	span.OldestTime = time.UnixMilli(hdrs[0].Timestamp).UTC()
	span.NewestTime = time.UnixMilli(hdrs[1].Timestamp).UTC()
	available := fmt.Sprintf("states available: TXID %d (%s) to TXID %d (%s)", span.Oldest,
		span.OldestTime.Format(time.RFC3339Nano), span.Newest, span.NewestTime.Format(time.RFC3339Nano))

	target := opts.TXID
	switch {
	case !opts.Timestamp.IsZero():
		if opts.Timestamp.Before(span.OldestTime) {
			return 0, span, &PointError{span, fmt.Sprintf("%s is before the oldest state retention kept; %s",
				opts.Timestamp.UTC().Format(time.RFC3339Nano), available)}
		}
		if opts.Timestamp.After(time.Now()) {
			return 0, span, &PointError{span, fmt.Sprintf("%s is in the future; %s",
				opts.Timestamp.UTC().Format(time.RFC3339Nano), available)}
		}
		if target, err = txidAt(ctx, store, files, opts.Timestamp, opts.parallelism()); err != nil {
			return 0, span, err
		}
	case target == 0:
		target = span.Newest
	case target < span.Oldest:
		return 0, span, &PointError{span, fmt.Sprintf("TXID %d is before the oldest state retention kept; %s", target, available)}
	case target > span.Newest:
		return 0, span, &PointError{span, fmt.Sprintf("TXID %d is after the newest TXID in the replica; %s", target, available)}
	}
	if _, err := planSorted(files, target); err != nil {
		if errors.Is(err, replica.ErrDamaged) {
			return 0, span, fmt.Errorf("plan restore from %s: %w", store, err)
		}
		// Inside a compacted range whose per-transaction files are gone.
		return 0, span, &PointError{span, err.Error() + "; " + available}
	}
	return target, span, nil
}
