package compact

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// due reports whether a level (or the snapshot level) with this interval has
// passed a clock boundary since it last ran, and records that it ran.
func (c *Compactor) due(level int, interval time.Duration, now time.Time) bool {
	boundary := now.Truncate(interval)
	if last, ok := c.lastCompact[level]; ok && !last.Before(boundary) {
		return false
	}
	c.lastCompact[level] = now
	return true
}

// compactLevel merges the files of the level below that are newer than this
// level's newest file into one file, when the level is due, or, for level 1,
// as soon as more than L0Trigger level-0 files wait. A failed write leaves
// the level due, so the retry does not wait for the next boundary.
//
// Above level 1, only files written at least one interval of this level ago
// are merged: until then they are the finer points a point-in-time restore
// lands on (30 s apart in level 1 for five minutes, 5 min apart in level 2
// for an hour). Merging them only once that is over means no range is held
// by two levels for longer than the pass that merged it: retention deletes
// the inputs at once (see superseded), instead of keeping a second copy of
// everything for an interval.
func (c *Compactor) compactLevel(ctx context.Context, l Level, now time.Time) error {
	var ripe time.Time
	if l.Level > c.cfg.Levels[0].Level {
		ripe = now.Add(-l.Interval)
	}
	inputs := c.inputsFor(l.Level, now, ripe)
	if len(inputs) == 0 {
		return nil
	}
	if l.Level == 1 && len(inputs) > c.cfg.L0Trigger {
		return c.write(ctx, l.Level, inputs, now)
	}
	prev, had := c.lastCompact[l.Level]
	if !c.due(l.Level, l.Interval, now) {
		return nil
	}
	err := c.write(ctx, l.Level, inputs, now)
	if err != nil {
		c.undue(l.Level, prev, had)
	}
	return err
}

// undue puts back a level's schedule after its work failed.
func (c *Compactor) undue(level int, prev time.Time, had bool) {
	if had {
		c.lastCompact[level] = prev
	} else {
		delete(c.lastCompact, level)
	}
}

// inputsFor picks, from level-1, the chain of files after the newest TXID
// this level (or one above it) holds, each step taking the file that reaches
// furthest (levels written by Litestream may overlap). It stops at a gap; the planner crosses levels, so a
// gap here is not a gap in the replica.
//
// Full-database files (MinTXID 1, such as the capture's first file) are left
// to the snapshot level: copying them into every level would store the whole
// database once per level.
//
// Files written after writtenBy (unless zero) are left out, which ends the
// chain before them. The chain is capped at maxInputs files; the next pass
// continues from there.
// It is one linear walk: level 0 may hold thousands of files.
func (c *Compactor) inputsFor(level int, now, writtenBy time.Time) []replica.LTXFile {
	after := c.reached(level, now)
	var src []replica.LTXFile
	for _, f := range c.idx.levels[level-1] {
		if f.MaxTXID > after && f.MinTXID > 1 && (writtenBy.IsZero() || !f.written().After(writtenBy)) && !c.quarantined[f.Key()] {
			src = append(src, f.file())
		}
	}
	if len(src) == 0 {
		return nil
	}
	// src is sorted by MinTXID: the chain starts with the earliest start
	// that reaches furthest, then each step takes, of the files starting at
	// or before the next TXID, the one reaching furthest.
	i := 0
	first := src[0]
	for ; i < len(src) && src[i].MinTXID == src[0].MinTXID; i++ {
		if src[i].MaxTXID > first.MaxTXID {
			first = src[i]
		}
	}
	chain := []replica.LTXFile{first}
	for len(chain) < maxInputs {
		cur := chain[len(chain)-1].MaxTXID
		var next replica.LTXFile
		for ; i < len(src) && src[i].MinTXID <= cur+1; i++ {
			if src[i].MaxTXID > cur && src[i].MaxTXID > next.MaxTXID {
				next = src[i]
			}
		}
		if next.Key == "" {
			break
		}
		chain = append(chain, next)
	}
	return chain
}

// waitingBytes is the size of the files of the level below level that level
// does not cover yet.
func (c *Compactor) waitingBytes(level int, now time.Time) int64 {
	after := c.reached(level, now)
	var n int64
	for _, f := range c.idx.levels[level-1] {
		if f.MaxTXID > after {
			n += f.Size
		}
	}
	return n
}

// snapshot writes a level-9 snapshot of the newest state when the snapshot
// interval is due and the state moved past the newest snapshot. It is the
// merge of the restore chain for the latest TXID: built from the store alone.
func (c *Compactor) snapshot(ctx context.Context, now time.Time) error {
	var latest ltx.TXID
	for _, f := range c.idx.all() {
		latest = max(latest, f.MaxTXID)
	}
	prev, had := c.lastCompact[replica.SnapshotLevel]
	if latest == 0 || latest <= c.idx.maxTXID(replica.SnapshotLevel) || !c.due(replica.SnapshotLevel, c.cfg.SnapshotInterval, now) {
		return nil
	}
	chain, err := restore.Chain(c.usable(), 0)
	if err != nil && len(c.quarantined) > 0 {
		// A damaged object breaks the chain: the writer's snapshot, from
		// its local database, heals it (see damage.go); retried after.
		c.undue(replica.SnapshotLevel, prev, had)
		return nil
	}
	if err == nil {
		err = c.write(ctx, replica.SnapshotLevel, chain, now)
	} else {
		err = fmt.Errorf("compact: cannot snapshot %s: %w", c.store, err)
	}
	if err != nil {
		c.undue(replica.SnapshotLevel, prev, had)
	}
	return err
}

// write merges inputs into one file at level with a conditional create. If
// the name is taken, another process did the same work: the existing file is
// checked to be a readable LTX file of that range and adopted.
//
// The merged file is uploaded from its scratch file with its size known, so
// neither the merge nor the upload holds the output in memory.
func (c *Compactor) write(ctx context.Context, level int, inputs []replica.LTXFile, now time.Time) error {
	tmp, size, hdr, err := c.merge(ctx, inputs)
	if err != nil {
		return err
	}
	defer removeTemp(tmp)
	if err := verifyOutput(tmp, hdr); err != nil {
		return fmt.Errorf("compact: the merged file for level %d, TXIDs %s..%s, in %s failed its check and was not uploaded: %w",
			level, hdr.MinTXID, hdr.MaxTXID, c.store, err)
	}
	f, err := c.upload(ctx, level, hdr, tmp, size)
	if errors.Is(err, replica.ErrExists) {
		if f, err = c.adopt(ctx, level, hdr.MinTXID, hdr.MaxTXID); err != nil {
			return err
		}
		c.log.Info("compaction already done by another process", "key", f.Key)
	} else if err != nil {
		return fmt.Errorf("compact: %w", err)
	} else {
		c.log.Debug("compacted", "key", f.Key, "inputs", len(inputs), "bytes", f.Size)
	}
	c.idx.add(newEntry(f, now))
	return nil
}

// upload creates the level file from r (size bytes) with a conditional
// create, under the budget and a watchdog that fires only if the transfer
// stalls. A taken key is returned as ErrExists.
func (c *Compactor) upload(ctx context.Context, level int, hdr ltx.Header, r io.Reader, size int64) (replica.LTXFile, error) {
	if err := c.budget.Acquire(ctx, 1); err != nil {
		return replica.LTXFile{}, err
	}
	defer c.budget.Release(1)
	ctx, wd, stop := replica.WithWatchdog(ctx, c.cfg.CallTimeout)
	defer stop()
	key := replica.LTXKey(level, hdr.MinTXID, hdr.MaxTXID)
	_, err := c.store.PutIfAbsent(ctx, key, wd.Reader(r), size)
	if errors.Is(err, replica.ErrExists) {
		return replica.LTXFile{}, fmt.Errorf("%s in %s: %w", key, c.store, err)
	} else if err != nil {
		return replica.LTXFile{}, fmt.Errorf("upload %s to %s: %w", key, c.store, replica.Stalled(ctx, err))
	}
	return replica.LTXFile{Level: level, MinTXID: hdr.MinTXID, MaxTXID: hdr.MaxTXID, Size: size, Key: key}, nil
}

func (c *Compactor) adopt(ctx context.Context, level int, min, max ltx.TXID) (replica.LTXFile, error) {
	key := replica.LTXKey(level, min, max)
	var info replica.ObjectInfo
	err := c.call(ctx, func(ctx context.Context) (err error) {
		info, err = c.store.Stat(ctx, key)
		return err
	})
	if err != nil {
		return replica.LTXFile{}, fmt.Errorf("compact: %s exists but cannot be read: %w", key, err)
	}
	f := replica.LTXFile{Level: level, MinTXID: min, MaxTXID: max, Size: info.Size, Key: key}
	var hdr ltx.Header
	err = c.call(ctx, func(ctx context.Context) (err error) {
		hdr, err = replica.ReadHeader(ctx, c.store, f)
		return err
	})
	if err != nil {
		return replica.LTXFile{}, fmt.Errorf("compact: %s was written by another process but is unreadable: %w", key, err)
	}
	if hdr.MinTXID != min || hdr.MaxTXID != max {
		return replica.LTXFile{}, fmt.Errorf("compact: %s in %s holds TXIDs %s..%s, not what its name says; the replica is damaged",
			key, c.store, hdr.MinTXID, hdr.MaxTXID)
	}
	return f, nil
}

// verifyOutput decodes a merged file before it is uploaded, as a restore
// would read it (every page, the file checksum), and checks it holds the
// range it will be named after: a merge bug or a bad scratch disk never
// reaches the store. It reads the scratch file once more, from the page
// cache, and rewinds it for the upload.
func verifyOutput(f *os.File, want ltx.Header) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	hdr, _, err := replica.DecodeLTX(bufio.NewReaderSize(f, 64<<10))
	if err == nil && (hdr.MinTXID != want.MinTXID || hdr.MaxTXID != want.MaxTXID || hdr.Commit != want.Commit) {
		err = fmt.Errorf("it holds TXIDs %s..%s (commit %d), not %s..%s (commit %d)",
			hdr.MinTXID, hdr.MaxTXID, hdr.Commit, want.MinTXID, want.MaxTXID, want.Commit)
	}
	if err != nil {
		return err
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}
