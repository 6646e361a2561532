package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// truncateBusyTimeout bounds a TRUNCATE checkpoint's wait: while it waits it
// holds the write lock, so the application would wait with it.
const truncateBusyTimeout = 50 * time.Millisecond

// Checkpoint ships everything, then copies the WAL into the database file
// (PASSIVE) under a write lock held for milliseconds, and, when the WAL file
// has grown past Options.TruncatePages, tries to truncate it.
func (db *DB) Checkpoint(ctx context.Context) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.usable(); err != nil {
		return err
	}
	return db.checkpointLocked(ctx)
}

func (db *DB) checkpointLocked(ctx context.Context) error {
	// Ship first without the lock, so that the locked part only captures
	// the frames written in between (an upload would hold the lock too long).
	if err := db.syncLocked(ctx); err != nil {
		return err
	}
	if err := exec(ctx, db.lock, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("checkpoint %s: take the write lock: %w", db.path, err)
	}
	locked := true
	unlock := func() {
		if locked {
			if err := endTx(db.lock); err != nil {
				db.log.Error("release the checkpoint write lock", "err", err)
			}
			locked = false
		}
	}
	defer unlock()

	// Nobody can commit now: capture to the very end of the log. Capturing
	// (not uploading) is enough: captured frames live in memory.
	if changed, err := db.walChanged(); err != nil {
		return err
	} else if changed {
		if err := db.capture(); err != nil {
			return err
		}
	}
	spare := db.readers[1-db.cur]
	// The lock connection never commits, so its data_version moves only when
	// the application commits.
	version, err := queryInt(ctx, db.lock, "PRAGMA data_version")
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", db.path, err)
	}
	if err := endTx(db.readers[db.cur]); err != nil {
		return fmt.Errorf("checkpoint %s: end the read transaction: %w", db.path, err)
	}
	db.reading = false
	busy, _, ckErr := checkpoint(ctx, spare, "PASSIVE")
	// Reopen the read transaction before the write lock goes: until then no
	// frame can be written, so none can be lost.
	if err := db.rotateRead(context.WithoutCancel(ctx)); err != nil {
		db.resyncWhy = "no read transaction after a checkpoint"
		return err
	}
	unlock()
	if ckErr != nil {
		return fmt.Errorf("checkpoint %s: %w", db.path, ckErr)
	}
	db.log.Debug("checkpoint", "mode", "PASSIVE", "busy", busy)
	if err := db.upload(ctx); err != nil {
		return err
	}

	st, err := os.Stat(db.walPath)
	if err != nil || db.pageSize == 0 || st.Size()/(int64(db.pageSize)+24) < int64(db.opts.TruncatePages) {
		return nil
	}
	return db.truncate(ctx, version)
}

// truncate runs a TRUNCATE checkpoint, which needs every reader gone, ours
// included. Frames the application commits while we hold no read transaction
// could be checkpointed and truncated before we read them, so data_version
// (changed by any other connection's commit) decides: unchanged since the
// write lock, nothing was lost; changed, resync by diff, which is exact.
func (db *DB) truncate(ctx context.Context, versionUnderLock int64) error {
	spare := db.readers[1-db.cur]
	if err := endTx(db.readers[db.cur]); err != nil {
		return fmt.Errorf("truncate WAL of %s: end the read transaction: %w", db.path, err)
	}
	db.reading = false
	spare.SetBusyTimeout(truncateBusyTimeout)
	busy, _, ckErr := checkpoint(ctx, spare, "TRUNCATE")
	spare.SetBusyTimeout(busyTimeout)
	if err := db.rotateRead(context.WithoutCancel(ctx)); err != nil {
		db.resyncWhy = "no read transaction after a TRUNCATE checkpoint"
		return err
	}
	version, err := queryInt(ctx, db.lock, "PRAGMA data_version")
	if err != nil || version != versionUnderLock {
		db.resyncWhy = "the application committed during a TRUNCATE checkpoint"
		if err := db.capture(); err != nil {
			return err
		}
		if err := db.upload(ctx); err != nil {
			return err
		}
	}
	if ckErr != nil && !errors.Is(ckErr, context.Canceled) {
		return fmt.Errorf("truncate WAL of %s: %w", db.path, ckErr)
	}
	db.log.Debug("checkpoint", "mode", "TRUNCATE", "busy", busy)
	return nil
}
