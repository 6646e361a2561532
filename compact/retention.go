package compact

import (
	"context"
	"fmt"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// superseded returns the files of levels 1 up to the one below the top
// compaction level whose range a higher compaction level's files cover
// entirely. The top level is kept: it is the coarsest point-in-time
// granularity between snapshots.
func (c *Compactor) superseded() map[string]bool {
	doomed := map[string]bool{}
	levels := c.cfg.Levels
	for i := 0; i+1 < len(levels); i++ {
		var spans [][2]ltx.TXID
		for _, l := range levels[i+1:] {
			spans = append(spans, c.idx.spans(l.Level)...)
		}
		for _, f := range c.idx.levels[levels[i].Level] {
			for _, sp := range spans {
				if sp[0] <= f.MinTXID && f.MaxTXID <= sp[1] {
					doomed[f.Key()] = true
					break
				}
			}
		}
	}
	return doomed
}

// expired adds to doomed the level-0 files past L0Retention and what the
// retention window no longer needs.
func (c *Compactor) expired(now time.Time, doomed map[string]bool) {
	covered := c.reached(c.cfg.Levels[0].Level, now)
	for _, f := range c.idx.levels[0] {
		if f.MaxTXID <= covered && now.Sub(f.written()) >= c.cfg.L0Retention {
			doomed[f.Key()] = true
		}
	}
	if base := c.retentionBase(now); base.MaxTXID != 0 {
		for _, f := range c.idx.entries() {
			if f.MaxTXID <= base.MaxTXID && (f.Level != base.Level || f.MinTXID != base.MinTXID || f.MaxTXID != base.MaxTXID) {
				doomed[f.Key()] = true
			}
		}
	}
	// The newest level-0 file stays, as Litestream's retention keeps it:
	// Litestream takes its position from it when it takes the replica over,
	// and without one it would start again at TXID 1 over this history.
	if l0 := c.idx.levels[0]; len(l0) > 0 {
		newest := l0[0]
		for _, f := range l0[1:] {
			if f.MaxTXID > newest.MaxTXID {
				newest = f
			}
		}
		delete(doomed, newest.Key())
	}
}

// retentionBase is the newest snapshot written at or before now-Retention:
// it restores every point of the window, so what precedes it goes. Zero if
// there is none.
func (c *Compactor) retentionBase(now time.Time) entry {
	cutoff := now.Add(-c.cfg.Retention)
	var base entry
	for _, s := range c.idx.levels[replica.SnapshotLevel] {
		if !s.written().After(cutoff) && s.MaxTXID > base.MaxTXID {
			base = s
		}
	}
	return base
}

// retentionSlot keys retention's schedule in lastCompact.
const retentionSlot = -1

// enforceRetention deletes, in batches:
//   - at once, level-n files (n >= 1, below the top compaction level) whose
//     whole range a durable file of a higher compaction level covers: a
//     superseded copy that only adds to the footprint (the higher level
//     restores the same states, and the level-0 files still kept restore
//     every transaction of the last L0Retention);
//   - level-0 files covered by level 1 and written more than L0Retention ago
//     (the per-transaction window point-in-time restores rely on);
//   - everything whose TXIDs all precede the newest snapshot written at or
//     before now-Retention (that snapshot restores every point of the window);
//
// but never a file of the restore chain for the newest TXID.
//
// The last two run at most once per level-1 interval so that deletions go
// in batches; the first has work only right after a higher level was
// written, so it runs in that pass, before the copies pile up.
func (c *Compactor) enforceRetention(ctx context.Context, now time.Time) error {
	c.mu.Lock()
	retry := c.undeleted
	c.undeleted = nil
	c.mu.Unlock()
	doomed := c.superseded()
	if c.due(retentionSlot, c.cfg.Levels[0].Interval, now) {
		c.expired(now, doomed)
	}
	if len(doomed) == 0 && len(retry) == 0 {
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
	if chain, err := restore.Chain(remaining, 0); len(doomed) > 0 && (err != nil || chain[len(chain)-1].MaxTXID != latest) {
		chain, err := restore.Chain(c.idx.all(), 0)
		if err != nil {
			c.log.Warn("retention skipped: the replica's newest state is not restorable from the files known", "err", err)
			doomed = nil
		}
		for _, f := range chain {
			delete(doomed, f.Key)
		}
	}
	keys := retry // already out of the index
	for _, f := range c.idx.entries() {
		if k := f.Key(); doomed[k] {
			keys = append(keys, k)
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		batch := keys[:n]
		gone := map[string]bool{}
		for _, k := range batch {
			gone[k] = true
		}
		if c.cfg.Deleter == nil || !c.cfg.Deleter.enqueue(c, batch) {
			if err := c.call(ctx, func(ctx context.Context) error { return c.store.Delete(ctx, batch...) }); err != nil {
				c.mu.Lock()
				c.undeleted = append(c.undeleted, retry...)
				c.mu.Unlock()
				return fmt.Errorf("compact: delete %d expired files from %s: %w", n, c.store, err)
			}
			c.log.Debug("retention deleted files", "count", n)
		}
		// Forgotten at once even when the delete runs in the background:
		// nothing needs them, and a failed delete comes back through
		// undeleted.
		c.idx.remove(gone)
		keys = keys[n:]
	}
	return nil
}
