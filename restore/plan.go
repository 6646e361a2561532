// Package restore rebuilds an SQLite database from a replica: it plans the
// fewest LTX files that reach a target (the latest state, a TXID or a point in
// time), decides from their page indexes which file holds the newest version
// of each page, streams them in parallel writing each page to its offset in
// the output (memory independent of the database's size), verifies every
// checksum and puts the result in place atomically.
//
// It imports replica, github.com/superfly/ltx and zombiezen.com/go/sqlite (for
// the optional integrity check); never engine, compact, server or cmd.
package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// ErrNoReplica: the replica holds no LTX file at all. Callers implementing
// -if-replica-exists test for it with errors.Is.
var ErrNoReplica = errors.New("replica holds no LTX file (nothing to restore)")

// errDamagedReplica words replica.ErrDamaged for a gap in the history.
var errDamagedReplica = fmt.Errorf("the replica is damaged (%w)", replica.ErrDamaged)

// Plan lists the replica once and returns the files that rebuild the target
// state, oldest first: a file starting at TXID 1 (a snapshot) followed by the
// files that continue it, the fewest possible.
func Plan(ctx context.Context, store replica.Store, opts Options) ([]replica.LTXFile, error) {
	return planFiles(ctx, store, opts, false)
}

// planFiles is Plan; eager: an answer waits on it (OpenPages), so level 0 is
// listed beside the upper levels (replica.ListNewestLTXEager).
func planFiles(ctx context.Context, store replica.Store, opts Options, eager bool) ([]replica.LTXFile, error) {
	files, target, partial, err := list(ctx, store, opts, eager)
	if err != nil {
		return nil, err
	}
	plan, err := planSorted(files, target)
	if err != nil && partial {
		if files, err = listAll(ctx, store, nil); err != nil {
			return nil, err
		}
		plan, err = planSorted(files, target)
	}
	if err != nil {
		return nil, fmt.Errorf("plan restore from %s: %w", store, err)
	}
	return plan, nil
}

// list lists every level of the replica, sorted as planSorted wants, and
// resolves opts' target to a TXID (0 = the newest).
// For the newest state it lists only what that takes
// (replica.ListNewestLTX): partial then says level-0 files the upper levels
// cover were left out, and a plan that fails is made again from listAll.
func list(ctx context.Context, store replica.Store, opts Options, eager bool) (files []replica.LTXFile, target ltx.TXID, partial bool, err error) {
	if err := opts.validate(); err != nil {
		return nil, 0, false, err
	}
	partial = opts.TXID == 0 && opts.Timestamp.IsZero()
	var levels [][]replica.LTXFile
	if partial && eager {
		levels, err = replica.ListNewestLTXEager(ctx, store)
	} else if partial {
		levels, err = replica.ListNewestLTX(ctx, store)
	} else {
		levels, err = replica.ListAllLTX(ctx, store)
	}
	if err != nil {
		return nil, 0, false, err
	}
	if opts.TXID == 0 && opts.Timestamp.IsZero() {
		if levels, err = dropInFlight(ctx, levels, store, opts); err != nil {
			return nil, 0, false, err
		}
	}
	files = flatten(levels)
	if len(files) == 0 {
		return nil, 0, false, fmt.Errorf("%s: %w", store, ErrNoReplica)
	}
	target = opts.TXID
	if !opts.Timestamp.IsZero() {
		if target, err = txidAt(ctx, store, files, opts.Timestamp, opts.parallelism()); err != nil {
			return nil, 0, false, err
		}
	}
	if target == 0 {
		// Fixed now, so leaving out a damaged newest file never restores an older state.
		for _, f := range files {
			target = max(target, f.MaxTXID)
		}
	}
	return files, target, partial, nil
}

// listAll lists every level, leaving out the keys in skip.
func listAll(ctx context.Context, store replica.Store, skip map[string]bool) ([]replica.LTXFile, error) {
	levels, err := replica.ListAllLTX(ctx, store)
	if err != nil {
		return nil, err
	}
	var files []replica.LTXFile
	for _, f := range flatten(levels) {
		if !skip[f.Key] {
			files = append(files, f)
		}
	}
	return files, nil
}

// flatten merges every level into one slice sorted by MinTXID, then MaxTXID.
func flatten(levels [][]replica.LTXFile) []replica.LTXFile {
	var files []replica.LTXFile
	for _, lvl := range levels {
		files = append(files, lvl...)
	}
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].MinTXID != files[j].MinTXID {
			return files[i].MinTXID < files[j].MinTXID
		}
		return files[i].MaxTXID < files[j].MaxTXID
	})
	return files
}

// Chain returns the fewest files, oldest first, that rebuild the state at
// target (0 = the newest TXID) from files, a listing of any levels in any
// order. It reads nothing: Plan and the compactor share it.
func Chain(files []replica.LTXFile, target ltx.TXID) ([]replica.LTXFile, error) {
	if len(files) == 0 {
		return nil, ErrNoReplica
	}
	return planSorted(flatten([][]replica.LTXFile{files}), target)
}

// planSorted picks the chain of files reaching target (0 = the newest TXID)
// from files sorted by MinTXID.
//
// It is greedy: from the current TXID cur it takes, across all levels, the file
// that continues the chain (MinTXID <= cur+1 < MaxTXID+1) and reaches furthest
// without passing the target. Reaching furthest at every step yields the
// fewest files, and the first step picks the newest snapshot (or any file
// starting at TXID 1) at or before the target.
//
// Overlap is allowed: Litestream's compacted levels need not share boundaries,
// so a file may start at or before cur. Its pages are the final versions of
// every page changed in its whole range, a superset of the changes after cur,
// so laying it over the state at cur yields the state at its MaxTXID. Only
// files that start exactly at cur+1 can have their PreApplyChecksum checked
// against the chain; the database checksum at the end checks everything.
func planSorted(files []replica.LTXFile, target ltx.TXID) ([]replica.LTXFile, error) {
	var latest ltx.TXID
	for _, f := range files {
		latest = max(latest, f.MaxTXID)
	}
	if target == 0 {
		target = latest
	} else if target > latest {
		return nil, fmt.Errorf("TXID %s (%d) is past the newest TXID in the replica, %s (%d)", target, target, latest, latest)
	}

	var plan []replica.LTXFile
	var cur ltx.TXID
	for cur < target {
		best, ok := nextFile(files, cur, target)
		if !ok {
			return nil, chainError(files, cur, target)
		}
		plan = append(plan, best)
		cur = best.MaxTXID
	}
	return plan, nil
}

// nextFile returns the file that continues the chain at cur and reaches
// furthest without passing target. Ties go to the file starting exactly at
// cur+1 (its pre-apply checksum can be checked), then to the smaller file.
func nextFile(files []replica.LTXFile, cur, target ltx.TXID) (best replica.LTXFile, ok bool) {
	for _, f := range files {
		if f.MinTXID > cur+1 {
			break // sorted by MinTXID: nothing later continues the chain
		}
		if f.MaxTXID <= cur || f.MaxTXID > target {
			continue
		}
		if !ok || better(f, best, cur) {
			best, ok = f, true
		}
	}
	return best, ok
}

func better(f, than replica.LTXFile, cur ltx.TXID) bool {
	if f.MaxTXID != than.MaxTXID {
		return f.MaxTXID > than.MaxTXID
	}
	if exact, thanExact := f.MinTXID == cur+1, than.MinTXID == cur+1; exact != thanExact {
		return exact
	}
	if f.Size != than.Size {
		return f.Size < than.Size
	}
	return f.Level > than.Level
}

// chainError explains why no file continues the chain at cur.
func chainError(files []replica.LTXFile, cur, target ltx.TXID) error {
	if cur == 0 {
		var oldestBase, oldest replica.LTXFile
		for _, f := range files {
			if f.MinTXID == 1 && (oldestBase.Key == "" || f.MaxTXID < oldestBase.MaxTXID) {
				oldestBase = f
			}
			if oldest.Key == "" || f.MinTXID < oldest.MinTXID {
				oldest = f
			}
		}
		if oldestBase.Key == "" {
			return fmt.Errorf("no snapshot: no file starts at TXID 1 (the oldest, %s, starts at TXID %s); "+
				"the replica's history is incomplete, restore from another replica", oldest.Key, oldest.MinTXID)
		}
		return fmt.Errorf("TXID %s (%d) predates the oldest snapshot %s: retention removed that history; "+
			"the oldest restorable TXID is %s (%d)", target, target, oldestBase.Key, oldestBase.MaxTXID, oldestBase.MaxTXID)
	}
	// A file continues the chain but passes the target: the target lies inside
	// a compacted file whose finer-grained files were deleted.
	var over replica.LTXFile
	for _, f := range files {
		if f.MinTXID <= cur+1 && f.MaxTXID > target && (over.Key == "" || f.MaxTXID < over.MaxTXID) {
			over = f
		}
	}
	if over.Key != "" {
		return fmt.Errorf("TXID %s (%d) lies inside compacted file %s whose per-transaction files were deleted; "+
			"the nearest restorable TXIDs are %s (%d) and %s (%d)", target, target, over.Key, cur, cur, over.MaxTXID, over.MaxTXID)
	}
	next := ltx.TXID(0)
	for _, f := range files {
		if f.MinTXID > cur+1 && (next == 0 || f.MinTXID < next) {
			next = f.MinTXID
		}
	}
	if next == 0 || next > target {
		next = target + 1
	}
	return fmt.Errorf("gap in the replica: the chain reaches TXID %s (%d) but no file holds TXID %s; "+
		"missing TXIDs %s..%s (%d..%d): %w, restore to TXID %d at most or from another replica",
		cur, cur, cur+1, cur+1, next-1, cur+1, next-1, errDamagedReplica, cur)
}

// Gap reports the first range of TXIDs, from..to, that no file holds on the
// way to the newest TXID in files (ok=false: the newest state has a chain).
// A missing start (no file at TXID 1) is reported as from=1.
func Gap(files []replica.LTXFile) (from, to ltx.TXID, ok bool) {
	if len(files) == 0 {
		return 0, 0, false
	}
	files = flatten([][]replica.LTXFile{files})
	var target ltx.TXID
	for _, f := range files {
		target = max(target, f.MaxTXID)
	}
	var cur ltx.TXID
	for cur < target {
		best, found := nextFile(files, cur, target)
		if !found {
			next := target + 1
			for _, f := range files {
				if f.MinTXID > cur+1 && f.MinTXID < next {
					next = f.MinTXID
				}
			}
			return cur + 1, next - 1, true
		}
		cur = best.MaxTXID
	}
	return 0, 0, false
}
