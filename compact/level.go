package compact

import (
	"context"
	"errors"
	"fmt"
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
// level's newest file into one file, when the level is due.
func (c *Compactor) compactLevel(ctx context.Context, l Level, now time.Time) error {
	inputs := c.inputsFor(l.Level)
	if len(inputs) == 0 || !c.due(l.Level, l.Interval, now) {
		return nil
	}
	return c.write(ctx, l.Level, inputs, now)
}

// inputsFor picks, from level-1, the chain of files after this level's newest
// TXID, each step taking the file that reaches furthest (levels written by
// Litestream may overlap). It stops at a gap; the planner crosses levels, so a
// gap here is not a gap in the replica.
//
// Full-database files (MinTXID 1, such as the capture's first file) are left
// to the snapshot level: copying them into every level would store the whole
// database once per level.
func (c *Compactor) inputsFor(level int) []replica.LTXFile {
	after := c.idx.maxTXID(level)
	var src []replica.LTXFile
	for _, f := range c.idx.levels[level-1] {
		if f.MaxTXID > after && f.MinTXID > 1 {
			src = append(src, f.LTXFile)
		}
	}
	if len(src) == 0 {
		return nil
	}
	chain := []replica.LTXFile{src[0]} // sorted by MinTXID: the earliest start
	for _, f := range src {
		if f.MinTXID == src[0].MinTXID && f.MaxTXID > chain[0].MaxTXID {
			chain[0] = f
		}
	}
	for {
		cur := chain[len(chain)-1].MaxTXID
		var next replica.LTXFile
		for _, f := range src {
			if f.MinTXID <= cur+1 && f.MaxTXID > cur && f.MaxTXID > next.MaxTXID {
				next = f
			}
		}
		if next.Key == "" {
			return chain
		}
		chain = append(chain, next)
	}
}

// snapshot writes a level-9 snapshot of the newest state when the snapshot
// interval is due and the state moved past the newest snapshot. It is the
// merge of the restore chain for the latest TXID: built from the store alone.
func (c *Compactor) snapshot(ctx context.Context, now time.Time) error {
	var latest ltx.TXID
	for _, f := range c.idx.all() {
		latest = max(latest, f.MaxTXID)
	}
	if latest == 0 || latest <= c.idx.maxTXID(replica.SnapshotLevel) || !c.due(replica.SnapshotLevel, c.cfg.SnapshotInterval, now) {
		return nil
	}
	chain, err := restore.Chain(c.idx.all(), 0)
	if err != nil {
		return fmt.Errorf("compact: cannot snapshot %s: %w", c.store, err)
	}
	return c.write(ctx, replica.SnapshotLevel, chain, now)
}

// write merges inputs into one file at level with a conditional create. If
// the name is taken, another process did the same work: the existing file is
// checked to be a readable LTX file of that range and adopted.
func (c *Compactor) write(ctx context.Context, level int, inputs []replica.LTXFile, now time.Time) error {
	data, hdr, err := merge(ctx, c.store, inputs)
	if err != nil {
		return err
	}
	f, err := replica.PutLTX(ctx, c.store, level, hdr.MinTXID, hdr.MaxTXID, data)
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
	c.idx.add(entry{LTXFile: f, written: now})
	return nil
}

func (c *Compactor) adopt(ctx context.Context, level int, min, max ltx.TXID) (replica.LTXFile, error) {
	key := replica.LTXKey(level, min, max)
	info, err := c.store.Stat(ctx, key)
	if err != nil {
		return replica.LTXFile{}, fmt.Errorf("compact: %s exists but cannot be read: %w", key, err)
	}
	f := replica.LTXFile{Level: level, MinTXID: min, MaxTXID: max, Size: info.Size, Key: key}
	hdr, err := replica.ReadHeader(ctx, c.store, f)
	if err != nil {
		return replica.LTXFile{}, fmt.Errorf("compact: %s was written by another process but is unreadable: %w", key, err)
	}
	if hdr.MinTXID != min || hdr.MaxTXID != max {
		return replica.LTXFile{}, fmt.Errorf("compact: %s in %s holds TXIDs %s..%s, not what its name says; the replica is damaged",
			key, c.store, hdr.MinTXID, hdr.MaxTXID)
	}
	return f, nil
}
