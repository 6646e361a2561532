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

// adoptCopy is a new lease holder's short way to its first write: this
// instance's follower has built a copy of the database from the replica's
// own files, each checked as a restore checks it, and it becomes the
// database file (Options.AdoptCopy) instead of a restore of the same state.
//
//   - After a hand-over or a release at a shipped position (lease.Final),
//     the copy must be at exactly that TXID, and the previous holder's
//     checksum is recorded as the replica's (engine.RecordPosition): the
//     engine's open compares the copy's pages with it, and lists nothing
//     (engine.Options.HandedPos: nobody wrote since the release).
//   - Otherwise (the previous holder's lease expired: it crashed) the copy
//     is taken at the TXID it reached, and the engine's open, which lists the
//     replica and removes a crashed writer's uploads in flight, takes the
//     copy's checksum as the replica's only if the replica ends at that very
//     TXID (engine.Options.CopyOfReplicaAt), as it would a restore's.
//
// A copy that differs from the replica fails the engine's comparison and is
// dropped and restored from the bucket, as any local file that differs from
// its replica (start). Only with sync durability, where a difference is
// refused rather than shipped as the next TXID.
func (h *Host) adoptCopy(ctx context.Context, name, path string, store replica.Store, log *slog.Logger) {
	if h.opts.AdoptCopy == nil || h.leases == nil || h.opts.Durability != groupcommit.Sync {
		return
	}
	l := h.leases.Lease(name)
	if l == nil {
		return
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return // a local file: the engine's open checks it against the replica
	}
	final, handed := l.Handed()
	start := time.Now()
	verified, at, ok := h.opts.AdoptCopy(ctx, name, path, final.TXID)
	if !ok {
		return
	}
	adopted := adoptedCopy{at: ltx.TXID(at)}
	if handed {
		pos := ltx.Pos{TXID: ltx.TXID(final.TXID), PostApplyChecksum: ltx.Checksum(final.Checksum)}
		if err := engine.RecordPosition(path, store.String(), pos); err != nil {
			log.Warn("could not record the follower's copy's position; restoring from the bucket instead", "err", err)
			_ = os.Remove(path)
			return
		}
		adopted.handed = &pos
	}
	h.opts.Replication.verified.put(path, verified)
	h.mu.Lock()
	if h.adopted == nil {
		h.adopted = map[string]adoptedCopy{}
	}
	h.adopted[path] = adopted
	h.mu.Unlock()
	log.Info("the follower's copy becomes the database", "txid", at, "released_there", handed, "took", time.Since(start))
}

// adoptedCopy is what adoptCopy tells the replication opened next.
type adoptedCopy struct {
	at     ltx.TXID // the copy's TXID
	handed *ltx.Pos // the position the previous holder released at, if it said
}

// takeAdopted returns and forgets what adoptCopy recorded for path, for
// the replication opened next on it: once only, since a reopen under the
// same lease may follow writes.
func (h *Host) takeAdopted(path string) adoptedCopy {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.adopted[path]
	delete(h.adopted, path)
	return a
}
