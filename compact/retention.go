package compact

import (
	"context"
	"fmt"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// retentionSlot keys retention's schedule in lastCompact.
const retentionSlot = -1

// enforceRetention deletes, in batches:
//   - level-0 files covered by level 1 and written more than L0Retention ago;
//   - level-n files covered by level n+1 and older than level n+1's interval;
//   - everything whose TXIDs all precede the newest snapshot written at or
//     before now-Retention (that snapshot restores every point of the window);
//
// but never a file of the restore chain for the newest TXID.
//
// It runs at most once per level-1 interval so that deletions go in batches.
func (c *Compactor) enforceRetention(ctx context.Context, now time.Time) error {
	if !c.due(retentionSlot, c.cfg.Levels[0].Interval, now) {
		return nil
	}
	doomed := map[string]bool{}

	coveredOlderThan := func(level int, age time.Duration) {
		covered := c.idx.maxTXID(level + 1)
		for _, f := range c.idx.levels[level] {
			if f.MaxTXID <= covered && now.Sub(f.written) >= age {
				doomed[f.Key] = true
			}
		}
	}
	coveredOlderThan(0, c.cfg.L0Retention)
	for i := 0; i+1 < len(c.cfg.Levels); i++ {
		coveredOlderThan(c.cfg.Levels[i].Level, c.cfg.Levels[i+1].Interval)
	}

	cutoff := now.Add(-c.cfg.Retention)
	var base entry
	for _, s := range c.idx.levels[replica.SnapshotLevel] {
		if !s.written.After(cutoff) && s.MaxTXID > base.MaxTXID {
			base = s
		}
	}
	if base.Key != "" {
		for _, f := range c.idx.entries() {
			if f.MaxTXID <= base.MaxTXID && f.Key != base.Key {
				doomed[f.Key] = true
			}
		}
	}
	if len(doomed) == 0 {
		return nil
	}

	// Never break the newest restore chain: if the files that would remain
	// still restore the newest TXID, delete everything doomed; otherwise keep
	// the current chain's files.
	var remaining []replica.LTXFile
	var latest ltx.TXID
	for _, f := range c.idx.all() {
		latest = max(latest, f.MaxTXID)
		if !doomed[f.Key] {
			remaining = append(remaining, f)
		}
	}
	if chain, err := restore.Chain(remaining, 0); err != nil || chain[len(chain)-1].MaxTXID != latest {
		chain, err := restore.Chain(c.idx.all(), 0)
		if err != nil {
			c.log.Warn("retention skipped: the replica's newest state is not restorable from the files known", "err", err)
			return nil
		}
		for _, f := range chain {
			delete(doomed, f.Key)
		}
	}
	var keys []string
	for _, f := range c.idx.entries() {
		if doomed[f.Key] {
			keys = append(keys, f.Key)
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		batch := keys[:n]
		if err := c.call(ctx, func(ctx context.Context) error { return c.store.Delete(ctx, batch...) }); err != nil {
			return fmt.Errorf("compact: delete %d expired files from %s: %w", n, c.store, err)
		}
		gone := map[string]bool{}
		for _, k := range batch {
			gone[k] = true
		}
		c.idx.remove(gone)
		c.log.Debug("retention deleted files", "count", n)
		keys = keys[n:]
	}
	return nil
}
