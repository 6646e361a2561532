package replicated

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/lease"
)

// tailCheckTimeout bounds the check Open starts in the background.
const tailCheckTimeout = time.Minute

// DB is a replicated database whose owner ships after each commit: Sync
// uploads everything committed as one LTX file.
type DB struct {
	core *core
	eng  *engine.DB
}

// Open starts replicating the database at path: it ships what the replica
// lacks, then starts compaction and the lease watch. Errors match
// engine.ErrDiverged (Options.RequireMatch) and engine.ErrFenced.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	c := newCore(opts)
	eng, err := engine.Open(ctx, path, c.store, engine.Options{
		Logger:       c.opts.Logger,
		RequireMatch: opts.RequireMatch,
		OnShip:       c.shipped,
		Pipeline:     pipeline(opts),
		// Only a lease holder pipelines, and it cleans up after a previous
		// holder's uploads in flight (engine.Options.RemoveInFlight).
		RemoveInFlight:  opts.Lease != nil,
		Verified:        opts.Verified,
		HandedPos:       opts.HandedPos,
		CopyOfReplicaAt: opts.CopyOfReplicaAt,
	})
	if err != nil {
		return nil, err
	}
	c.snapshot = eng.Snapshot
	c.start(context.Background())
	if c.comp != nil {
		c.comp.TailEnd(eng.Pos().TXID) // what this writer ships next is not an earlier run's
		// Check what earlier runs left unmerged now, off the write path:
		// the first acknowledgement waits for it (restorable) and usually
		// finds it done. A failure here is retried by that Sync.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), tailCheckTimeout)
			defer cancel()
			_ = c.comp.CheckTail(ctx)
		}()
	}
	return &DB{core: c, eng: eng}, nil
}

// Sync ships every committed frame not shipped yet and returns the position
// the store has accepted. Once the lease is lost, the upload is refused and
// the error matches engine.ErrFenced, as when another writer took the TXID.
// An upload the store accepted only after the lease's deadline returns the
// new position with an error matching lease.ErrLate: it is in the history,
// but another instance may hold the lease by now, so it acknowledges nothing.
func (d *DB) Sync(ctx context.Context) (ltx.Pos, error) {
	before := d.eng.Pos()
	pos, err := d.eng.Sync(ctx)
	return d.acknowledge(ctx, before, pos, err)
}

// acknowledge judges an upload that moved the shipped position from before
// to pos: a fenced one hands the history over (historyTaken); one that
// landed while the lease was not valid (lost or suspended) acknowledges
// nothing, and the lease decides what follows (a renewal resumes it, or
// Lost ends the write role); any other must leave its TXID restorable
// (acknowledged means restorable: see heal.go).
func (d *DB) acknowledge(ctx context.Context, before, pos ltx.Pos, err error) (ltx.Pos, error) {
	if l := d.core.opts.Lease; l != nil {
		if errors.Is(err, engine.ErrFenced) {
			d.core.historyTaken(err)
		} else if err == nil && pos.TXID != before.TXID && !l.Valid() {
			err = fmt.Errorf("TXID %s of %s: %w", pos.TXID, d.core.opts.Name, lease.ErrLate)
		}
	}
	if err == nil {
		err = d.core.restorable(ctx, pos)
	}
	return pos, err
}

// Writable reports whether this instance may still write (and serve reads
// of its local copy): no lease, or a lease still valid.
func (d *DB) Writable() bool {
	l := d.core.opts.Lease
	return l == nil || l.Valid()
}

// Changed reports whether Sync has anything to upload, without a store
// request.
func (d *DB) Changed() (bool, error) { return d.eng.Changed() }

// Pos is the position the store has accepted; it takes no lock.
func (d *DB) Pos() ltx.Pos { return d.eng.Pos() }

// Captured is the newest TXID captured, shipped or not (engine.DB.Captured).
func (d *DB) Captured() ltx.TXID { return d.eng.Captured() }

// LastCapture places the latest capture in time (engine.DB.LastCapture).
func (d *DB) LastCapture() engine.CaptureMark { return d.eng.LastCapture() }

// Close ships what is left (refused once the lease is lost), stops
// compaction and releases the lease. forget: the replica is about to be
// purged, so compaction writes nothing more; otherwise a scheduler merges
// what level 0 holds later, unless the lease passes to another instance.
func (d *DB) Close(ctx context.Context, forget bool) error {
	start := time.Now()
	err := d.eng.Close(ctx)
	var final *ltx.Pos
	if err == nil && d.eng.ShippedAll() {
		pos := d.eng.Pos() // the next holder may check a copy against it
		final = &pos
	}
	d.core.finish(ctx, !forget, time.Since(start), final)
	return err
}

// CloseKeepLease closes like Close but leaves the lease held, for a
// database reopened under it at once (OnHistoryTaken).
func (d *DB) CloseKeepLease(ctx context.Context) error {
	d.core.keepLease.Store(true)
	return d.Close(ctx, true)
}

// Begin captures what is committed and starts its upload without waiting
// for the uploads in flight (engine.DB.Begin, Options.Pipeline of them at
// most). wait answers like Sync: once that file and every earlier one are
// in the store, with lease.ErrLate if the lease's deadline passed before,
// and only once the position is restorable (heal.go).
func (d *DB) Begin(ctx context.Context) (wait func(context.Context) (ltx.Pos, error), err error) {
	before := d.eng.Pos()
	f, err := d.eng.Begin(ctx)
	if err != nil {
		if errors.Is(err, engine.ErrFenced) && d.core.opts.Lease != nil {
			d.core.historyTaken(err)
		}
		return nil, err
	}
	return func(ctx context.Context) (ltx.Pos, error) {
		pos, err := f.Wait(ctx)
		return d.acknowledge(ctx, before, pos, err)
	}, nil
}

// Pipelined reports whether Begin keeps more than one upload in flight.
func (d *DB) Pipelined() bool { return d.eng.Pipelined() }

// pipeline is the engine's pipeline depth: only a writer holding a lease
// keeps several uploads in flight, since only a lease that was not released
// tells a reader that the newest files may be uploads in flight past a
// missing TXID rather than damage (replica.LeaseOpen).
func pipeline(opts Options) int {
	if opts.Lease == nil {
		return 1
	}
	return opts.Pipeline
}
