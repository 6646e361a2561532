package replicated

import (
	"context"
	"errors"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/engine"
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
	})
	if err != nil {
		return nil, err
	}
	c.snapshot = eng.Snapshot
	c.start(context.Background())
	if c.comp != nil {
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
func (d *DB) Sync(ctx context.Context) (ltx.Pos, error) {
	pos, err := d.eng.Sync(ctx)
	if d.core.opts.Lease != nil && errors.Is(err, engine.ErrFenced) {
		d.core.leaseLost(err)
	}
	if err == nil {
		// Acknowledged means restorable: see heal.go.
		err = d.core.restorable(ctx, pos)
	}
	return pos, err
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
	err := d.eng.Close(ctx)
	d.core.finish(ctx, !forget)
	return err
}
