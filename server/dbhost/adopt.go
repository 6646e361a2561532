package dbhost

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/groupcommit"
)

// adoptCopy is a new lease holder's short way to its first write after a
// hand-over: the previous holder shipped everything and released the lease
// at a position it wrote into the lease object (lease.Final), and this
// instance's follower has applied exactly that position. Its copy becomes
// the database file (Options.AdoptCopy), with the previous holder's
// checksum recorded as the replica's (engine.RecordPosition), so the
// engine's open compares the copy's pages with it and continues, without
// the restore's requests, nor the listing that finds the replica's newest
// position (known: lease.Final); a copy that differs fails that comparison and is
// dropped and restored from the bucket, as any local file that differs
// from its replica (start). Only with sync durability, where a difference
// is refused rather than shipped as the next TXID.
func (h *Host) adoptCopy(ctx context.Context, name, path string, store replica.Store, log *slog.Logger) {
	if h.opts.AdoptCopy == nil || h.leases == nil || h.opts.Durability != groupcommit.Sync {
		return
	}
	l := h.leases.Lease(name)
	if l == nil {
		return
	}
	final, ok := l.Handed()
	if !ok {
		return
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return // a local file: the engine's open checks it against the replica
	}
	start := time.Now()
	verified, ok := h.opts.AdoptCopy(ctx, name, path, final.TXID)
	if !ok {
		return
	}
	pos := ltx.Pos{TXID: ltx.TXID(final.TXID), PostApplyChecksum: ltx.Checksum(final.Checksum)}
	if err := engine.RecordPosition(path, store.String(), pos); err != nil {
		log.Warn("could not record the follower's copy's position; restoring from the bucket instead", "err", err)
		_ = os.Remove(path)
		return
	}
	h.opts.Replication.verified.put(path, verified)
	h.mu.Lock()
	if h.adopted == nil {
		h.adopted = map[string]ltx.Pos{}
	}
	h.adopted[path] = pos
	h.mu.Unlock()
	log.Info("the follower's copy becomes the database: the previous writer released the lease at its TXID",
		"txid", final.TXID, "took", time.Since(start))
}

// takeAdopted returns and forgets the position of the copy adopted at
// path, for the replication opened next on it (engine.Options.HandedPos):
// once only, since a reopen under the same lease may follow writes.
func (h *Host) takeAdopted(path string) *ltx.Pos {
	h.mu.Lock()
	defer h.mu.Unlock()
	pos, ok := h.adopted[path]
	if !ok {
		return nil
	}
	delete(h.adopted, path)
	return &pos
}
