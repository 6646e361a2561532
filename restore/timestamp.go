package restore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// txidAt resolves a point in time to the newest restorable TXID whose LTX
// header Timestamp is at or before t. A file's header Timestamp is the time of its
// MaxTXID (compactions copy their last input's), so every file contributes one
// (TXID, time) pair. Headers come from range reads, fetched in parallel and in
// two rounds so that history older than the chosen base snapshot is never read:
// first the files starting at TXID 1, then only the files after the base.
func txidAt(ctx context.Context, store replica.Store, files []replica.LTXFile, t time.Time, parallelism int) (ltx.TXID, error) {
	tms := t.UnixMilli()

	var bases []replica.LTXFile
	for _, f := range files {
		if f.MinTXID == 1 {
			bases = append(bases, f)
		}
	}
	if len(bases) == 0 {
		return 0, fmt.Errorf("no snapshot in %s: no file starts at TXID 1, so no point in time can be restored", store)
	}
	hdrs, err := readHeaders(ctx, store, bases, parallelism)
	if err != nil {
		return 0, err
	}
	var target ltx.TXID
	earliest := hdrs[0]
	for _, h := range hdrs {
		if h.Timestamp <= tms && h.MaxTXID > target {
			target = h.MaxTXID
		}
		if h.Timestamp < earliest.Timestamp {
			earliest = h
		}
	}
	if target == 0 {
		return 0, fmt.Errorf("timestamp %s is before the oldest restorable state in %s (TXID %s at %s)",
			t.UTC().Format(time.RFC3339Nano), store, earliest.MaxTXID, time.UnixMilli(earliest.Timestamp).UTC().Format(time.RFC3339Nano))
	}

	var later []replica.LTXFile
	for _, f := range files {
		if f.MaxTXID > target {
			later = append(later, f)
		}
	}
	if hdrs, err = readHeaders(ctx, store, later, parallelism); err != nil {
		return 0, err
	}
	// Not every file's MaxTXID is a restore point: a per-transaction file
	// left inside a compacted range whose neighbours were deleted cannot be
	// reached. Take the newest one at or before t that a chain reaches (the
	// snapshot found above always is one).
	var candidates []ltx.TXID
	for _, h := range hdrs {
		if h.Timestamp <= tms && h.MaxTXID > target {
			candidates = append(candidates, h.MaxTXID)
		}
	}
	slices.Sort(candidates)
	sorted := flatten([][]replica.LTXFile{files})
	for i := len(candidates) - 1; i >= 0; i-- {
		if _, err := planSorted(sorted, candidates[i]); err == nil {
			return candidates[i], nil
		}
	}
	return target, nil
}

// readHeaders fetches the headers of files, parallelism at a time.
func readHeaders(ctx context.Context, store replica.Store, files []replica.LTXFile, parallelism int) ([]ltx.Header, error) {
	hdrs := make([]ltx.Header, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			hdrs[i], errs[i] = replica.ReadHeader(ctx, store, f)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return hdrs, nil
}
