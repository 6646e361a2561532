package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/superfly/ltx"
)

// MaxInFlight is the most level-0 files a writer has in flight at once
// (uploads started, not all accepted yet). A writer acknowledges a file only
// once every earlier one is in the store, and starts the upload of TXID
// N+MaxInFlight only after N was accepted; so the store may hold N+1 without
// N only while N is in flight or after its writer died or lost it, and then
// only files below N+MaxInFlight — never acknowledged, since N is missing.
const MaxInFlight = 16

// InFlightTail returns the level-0 files past the first gap at the top of
// the history when they can only be uploads in flight of a writer that did
// not land an earlier TXID: past the highest TXID the upper levels cover,
// the level-0 files run contiguously up to end, and every file beyond the
// gap after end is a level-0 file below end+1+MaxInFlight. Those files were
// never acknowledged: the history ends at end. The shape alone cannot tell
// them from a missing file among the newest: only a replica whose writer
// holds a lease pipelines its uploads, and only while that lease is not
// released (LeaseOpen) can such a tail exist. Anything else past a gap
// (a compacted file, or a file further on, which a writer uploads only
// after the missing TXID was accepted) is damage, and nil is returned.
func InFlightTail(levels [][]LTXFile) (end ltx.TXID, tail []LTXFile) {
	var upper ltx.TXID
	for lvl, files := range levels {
		if lvl == 0 {
			continue
		}
		for _, f := range files {
			upper = max(upper, f.MaxTXID)
		}
	}
	if len(levels) == 0 {
		return upper, nil
	}
	end = upper
	var beyond []LTXFile
	for _, f := range levels[0] { // sorted by MinTXID, then MaxTXID
		switch {
		case f.MaxTXID <= end:
		case f.MinTXID <= end+1 && len(beyond) == 0:
			end = f.MaxTXID
		default:
			beyond = append(beyond, f)
		}
	}
	if len(beyond) == 0 {
		return end, nil
	}
	for _, f := range beyond {
		if f.MinTXID != f.MaxTXID || f.MaxTXID >= end+1+MaxInFlight {
			return end, nil
		}
	}
	if end == 0 && upper == 0 && len(levels[0]) == len(beyond) {
		// No history below the gap at all: not a writer's tail either.
		return end, nil
	}
	return end, beyond
}

// leaseKey is the writer lease's object (package lease owns its format;
// only its expiry is read here, by readers below lease in the package map).
const leaseKey = SluiceDir + "/lease"

// LeaseOpen reports whether the replica has a writer lease that was not
// released: held now, or left to expire by a writer that stopped without
// releasing it. Only then may the newest files be uploads in flight past a
// TXID that never landed (InFlightTail); a released lease means its holder
// shipped everything in order before letting go.
func LeaseOpen(ctx context.Context, s Store) (bool, error) {
	rc, err := s.Get(ctx, leaseKey)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read %s in %s: %w", leaseKey, s, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return false, fmt.Errorf("read %s in %s: %w", leaseKey, s, err)
	}
	var rec struct {
		Expires time.Time `json:"expires"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return false, fmt.Errorf("read %s in %s: %w", leaseKey, s, err)
	}
	// lease.Record.Released: a release sets the expiry to the epoch.
	return !rec.Expires.IsZero() && rec.Expires.Unix() > 1, nil
}
