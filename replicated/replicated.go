// Package replicated opens one replicated database: capture and ship
// (engine), compaction and retention (compact), the writer lease's guard
// (lease.GuardStore), fan-out of every shipped file to the caller, and an
// orderly shutdown: the final upload, compaction stopped (or flushed), then
// the lease released. The sidecar (cmd/sluice: replicate, run) and the
// server (server/dbhost) both assemble a database through it, so the rules
// of ARCHITECTURE.md (one history, nothing written once the lease is lost)
// are kept in one place.
//
// Two shapes share that assembly: DB, whose owner ships after each commit
// (the server's write path), and Stream, which ships a database another
// process writes on an interval (the sidecar).
package replicated

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/superfly/ltx"
)

// Options configure one replicated database.
type Options struct {
	// Name identifies the database in compaction logs and in a shared
	// compaction scheduler (the server's database name, the sidecar's path).
	Name   string
	Logger *slog.Logger // the engine adds the database's path itself
	Store  replica.Store
	// Lease, if set, is the database's writer lease, already held: every
	// write to Store goes through lease.GuardStore, and the shutdown
	// releases it once the final upload is done. If Open fails, the lease
	// stays the caller's to release.
	Lease *lease.Lease
	// OnLeaseLost is called once, on a goroutine of its own, when the
	// database stops being the writer while open: its lease was lost, or
	// (with a lease) an upload was fenced by another writer. A shutdown's
	// own release is not a loss.
	OnLeaseLost func(cause error)
	// OnHandOver is called once, on a goroutine of its own, when a newer
	// instance asked for the lease (lease.Lease.HandOver): the owner
	// finishes what is queued and closes the database, which releases the
	// lease reserved for the requester.
	OnHandOver func()
	// OnHistoryTaken is called once, on a goroutine of its own, when an
	// upload was fenced while the lease still holds: a previous holder's
	// late upload took the TXID (it is in the one history, and that holder
	// may have acknowledged it). The owner drops its unshipped commits,
	// which nobody was told were durable, and catches up from the bucket
	// under the same lease (CloseKeepLease). Without it, this is a loss
	// (OnLeaseLost).
	OnHistoryTaken func(cause error)
	// RequireMatch makes Open fail with an error matching engine.ErrDiverged
	// when the local file and the replica differ (DB only).
	RequireMatch bool
	// Compaction, if set, compacts and prunes the replica. Nil: none.
	Compaction *Compaction
	// OnShip learns every file the store accepted (metrics). It runs on the
	// shipping goroutine with the engine's lock held: it must be quick and
	// must not call back into the database.
	OnShip func(replica.LTXFile)
	// OnShipBody, if set, also learns the accepted file's body (embedded
	// replicas' sync history). Same constraints as OnShip; body must not
	// be modified.
	OnShipBody func(f replica.LTXFile, body []byte)
	// Damage, if set, hears of damaged objects found in the replica and of
	// their healing (see heal.go).
	Damage DamageReporter
	// Pipeline is how many uploads DB.Begin keeps in flight at once
	// (engine.Options.Pipeline); 0 or 1: one at a time.
	Pipeline int
	// Verified, if set, are the files the restore that just wrote the
	// local database read whole and verified (restore.Result.Files): the
	// check of the unmerged files before the first acknowledgement does
	// not read them again (compact.Compactor.Verified).
	Verified []replica.LTXFile
	// HandedPos, if set, is the replica's position as the previous lease
	// holder released it (engine.Options.HandedPos).
	HandedPos *ltx.Pos
	// CopyOfReplicaAt, if not 0: the local file is a copy of the replica at
	// that TXID (engine.Options.CopyOfReplicaAt).
	CopyOfReplicaAt ltx.TXID
	// Followed, if set, reports whether another instance keeps a copy of
	// this database current (it subscribed to this writer's pushes). The
	// lease released at close is then most likely taken by an instance
	// that opens its own copy, which checked every file it applied, so the
	// release does not wait for level 0 to be merged first (finish).
	Followed func() bool
	// Successor, if set, returns an instance waiting for the lease that
	// accept takes, to hand the lease to when this writer closes having
	// shipped everything (lease.Lease.HandTo): it holds the lease without a
	// write of its own. false: the lease is released.
	Successor func(accept func(lease.Successor) bool) (lease.Successor, bool)
	// OnReleased, if set, hears the record the lease was released (or
	// handed over) with at close: the closing instance forwards what still
	// reaches it to the holder it names without reading the lease.
	OnReleased func(rec lease.Record)
}

// Compaction says how a replica is compacted.
type Compaction struct {
	Config compact.Config
	// Scheduler runs the passes beside other databases' on a few shared
	// workers (the server). Nil: the database compacts on its own timer,
	// and a graceful stop merges its level 0 before the lease is released
	// (the sidecar).
	Scheduler *compact.Scheduler
}

// shutdownFlushTimeout bounds the merge of level 0 when a database with its
// own compaction timer stops: exit comes within half a second of the final
// upload (Cloud Run allows 10 s after SIGTERM, and a replica left
// uncompacted is complete; restores only read more files).
const shutdownFlushTimeout = 500 * time.Millisecond

// shutdownFlushMaxBytes is the most level 0 a stop merges: about what a
// small machine merges and uploads within shutdownFlushTimeout. A larger
// level 0 (a writer going flat out) is left to the next start's first pass
// rather than merged part-way and thrown away at the timeout.
const shutdownFlushMaxBytes = 16 << 20

// releaseTimeout bounds the lease release at shutdown.
const releaseTimeout = 10 * time.Second

// core is what DB and Stream share: the guarded store, compaction, the
// lease watch and the shutdown.
type core struct {
	opts  Options
	log   *slog.Logger // with "db" = Name
	store replica.Store

	comp        *compact.Compactor // nil: no compaction
	compRelease func(flush bool)   // the scheduler's handle
	compStop    context.CancelFunc // the database's own compaction timer
	compDone    chan struct{}

	// snapshot uploads the local database as a level-9 snapshot: how a
	// damaged replica is healed (heal.go).
	snapshot func(context.Context) (replica.LTXFile, error)
	hs       healState

	closing   atomic.Bool
	keepLease atomic.Bool   // finish leaves the lease held (CloseKeepLease)
	closed    chan struct{} // ends the lease watch
	lostOnce  sync.Once
	finished  sync.Once
}

func newCore(opts Options) *core {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &core{opts: opts, log: opts.Logger.With("db", opts.Name), store: opts.Store, closed: make(chan struct{})}
	if opts.Lease != nil {
		c.store = lease.GuardStore(opts.Store, opts.Lease)
	}
	if opts.Compaction != nil {
		// Compaction writes the history too: through the guard.
		cfg := opts.Compaction.Config
		cfg.OnDamage = c.damaged
		c.comp = compact.New(c.store, cfg, c.log)
		c.comp.Verified(opts.Verified)
	}
	return c
}

// shipped fans one accepted file out to compaction and the caller.
func (c *core) shipped(f replica.LTXFile, body []byte) {
	if c.comp != nil {
		c.comp.NotifyBody(f, body)
	}
	if c.opts.OnShip != nil {
		c.opts.OnShip(f)
	}
	if c.opts.OnShipBody != nil {
		c.opts.OnShipBody(f, body)
	}
}

// start runs compaction (its own timer stops when ctx ends) and watches the lease.
func (c *core) start(ctx context.Context) {
	if c.comp != nil {
		if s := c.opts.Compaction.Scheduler; s != nil {
			c.compRelease = s.Add(c.opts.Name, c.comp)
		} else {
			cctx, stop := context.WithCancel(ctx)
			c.compStop, c.compDone = stop, make(chan struct{})
			go func() {
				defer close(c.compDone)
				_ = c.comp.Run(cctx)
			}()
		}
	}
	if l := c.opts.Lease; l != nil {
		go func() {
			handOver := l.HandOver()
			for {
				select {
				case <-l.Lost():
					if !c.closing.Load() {
						c.leaseLost(l.Err())
					}
					return
				case <-handOver:
					handOver = nil
					if c.opts.OnHandOver != nil && !c.closing.Load() {
						go c.opts.OnHandOver()
					}
				case <-c.closed:
					return
				}
			}
		}()
	}
}

// historyTaken reports a fenced upload: a previous holder's late file when
// the lease still holds, else the end of the write role.
func (c *core) historyTaken(cause error) {
	if l := c.opts.Lease; l != nil && l.Valid() && c.opts.OnHistoryTaken != nil {
		if c.closing.Load() {
			return
		}
		c.lostOnce.Do(func() { go c.opts.OnHistoryTaken(cause) })
		return
	}
	c.leaseLost(cause)
}

// leaseLost reports the end of the write role, once.
func (c *core) leaseLost(cause error) {
	if c.opts.OnLeaseLost == nil || c.closing.Load() {
		return
	}
	c.lostOnce.Do(func() { go c.opts.OnLeaseLost(cause) })
}

// flushLevel0 folds this run's per-sync files into one, so the next open
// restores from a few objects rather than one per sync (bounded).
func (c *core) flushLevel0(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlushTimeout)
	defer cancel()
	switch err := c.comp.Flush(fctx, time.Now(), shutdownFlushMaxBytes); {
	case errors.Is(err, compact.ErrFlushTooLarge):
		c.log.Info("level 0 left for the next start to compact; every change was shipped", "reason", err)
	case err != nil:
		c.log.Warn("could not compact on shutdown; every change was shipped, only restores read more files", "err", err)
	}
}

// followed reports Options.Followed.
func (c *core) followed() bool { return c.opts.Followed != nil && c.opts.Followed() }

// finish runs after the final upload: it stops compaction, merging level 0
// first when flush is set and this process keeps the replica, then
// releases the lease. Safe to call twice.
// shipping is how long the final upload took (logged with the other steps
// when a lease is released: together they are this side of a hand-over).
// final, if set, is the position everything was shipped up to: the release
// records it for the next holder (lease.Lease.ReleaseAt).
func (c *core) finish(ctx context.Context, flush bool, shipping time.Duration, final *ltx.Pos) {
	c.finished.Do(func() {
		start := time.Now()
		c.closing.Store(true)
		close(c.closed)
		switch {
		case c.compRelease != nil:
			// The scheduler merges a released database's level 0 later, on
			// its own: not for a replica whose lease is released next, which
			// another instance may own by then; that one is merged now,
			// bounded, while the lease still holds. It costs this holder
			// about one upload (level 0's bodies are cached), where the next
			// holder would read every unmerged file before its first
			// acknowledgement (compact.CheckTail): that would be the
			// hand-over's gap.
			c.compRelease(flush && c.opts.Lease == nil)
			if flush && c.opts.Lease != nil && !c.followed() {
				c.flushLevel0(ctx)
			}
		case c.compStop != nil:
			c.compStop()
			<-c.compDone
			if flush {
				c.flushLevel0(ctx)
			}
		}
		if c.comp != nil {
			c.comp.Close()
		}
		if l := c.opts.Lease; l != nil && !c.keepLease.Load() {
			stopped := time.Since(start)
			rctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
			release := l.Release
			if final != nil && final.TXID != 0 {
				at := lease.Final{TXID: uint64(final.TXID), Checksum: uint64(final.PostApplyChecksum)}
				release = func(ctx context.Context) error { return l.ReleaseAt(ctx, at) }
				if c.opts.Successor != nil {
					if next, ok := c.opts.Successor(l.Accepts); ok {
						release = func(ctx context.Context) error { return l.HandTo(ctx, next, at) }
					}
				}
			}
			if err := release(rctx); err != nil {
				c.log.Warn("releasing the lease failed; the next holder waits for it to expire", "err", err)
			} else if c.opts.OnReleased != nil {
				rec, _ := l.ReleasedAs()
				c.opts.OnReleased(rec)
			}
			cancel()
			c.log.Info("closed and released the lease", "final_upload", shipping, "compaction_stop", stopped,
				"release", time.Since(start)-stopped)
		}
	})
}
