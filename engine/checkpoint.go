package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"zombiezen.com/go/sqlite"
)

// truncateBusyTimeout bounds a TRUNCATE checkpoint's wait: while it waits it
// holds the write lock, so the application would wait with it.
const truncateBusyTimeout = 50 * time.Millisecond

// writeLockWait bounds how long a checkpoint waits for the application's
// write lock. A writer that never pauses may keep it out for longer; the
// checkpoint is then simply tried again after the next sync (the log grows a
// little meanwhile) rather than holding up shipping for seconds.
const writeLockWait = 250 * time.Millisecond

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

// errWriteLockBusy: the application kept the write lock for all of writeLockWait.
var errWriteLockBusy = errors.New("the application held the write lock throughout")

func (db *DB) checkpointLocked(ctx context.Context) error {
	// Ship first without the lock, so that the locked part only captures
	// the frames written in between (an upload would hold the lock too long).
	if err := db.syncLocked(ctx); err != nil {
		return err
	}
	spare := db.readers[1-db.cur]
	// Backfill what is captured while still reading: the read transaction
	// stops the backfill at its own snapshot, which is captured, and keeps the
	// log from being restarted. The locked checkpoint below then has only the
	// last few frames to copy.
	if _, _, err := checkpoint(ctx, spare, "PASSIVE"); err != nil {
		return fmt.Errorf("checkpoint %s: %w", db.path, err)
	}
	lockBegan := time.Now()
	err := db.takeWriteLock(ctx)
	if sqlite.ErrCode(err).ToPrimary() == sqlite.ResultBusy {
		db.log.Debug("checkpoint skipped", "reason", errWriteLockBusy)
		return nil
	} else if err != nil {
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
	// (not uploading) is enough: the pending file keeps captured frames.
	if changed, err := db.walChanged(); err != nil {
		return err
	} else if changed {
		db.markCapture(lockBegan, time.Now()) // the write lock draws this capture's boundary
		if err := db.capture(); err != nil {
			return err
		}
	}
	if err := endTx(db.readers[db.cur]); err != nil {
		return fmt.Errorf("checkpoint %s: end the read transaction: %w", db.path, err)
	}
	db.reading = false
	busy, _, ckErr := checkpoint(ctx, spare, "PASSIVE")
	// Reopen the read transaction before the write lock goes: until then no
	// frame can be written, so none can be lost. If the log is now fully
	// backfilled, the new reader takes read-mark 0 (it reads the database
	// file), which lets the log be restarted or truncated but forbids any
	// further backfill (see the DB doc comment).
	if err := db.rotateRead(context.WithoutCancel(ctx)); err != nil {
		db.resyncWhy = "no read transaction after a checkpoint"
		return err
	}
	unlock()
	if ckErr != nil {
		return fmt.Errorf("checkpoint %s: %w", db.path, ckErr)
	}
	db.log.Debug("checkpoint", "mode", "PASSIVE", "busy", busy)

	// Truncate right away, before the application's next commit makes it
	// impossible; the upload can wait that long.
	st, err := os.Stat(db.walPath)
	if err == nil && !busy && db.pageSize != 0 && st.Size()/(int64(db.pageSize)+24) >= int64(db.opts.TruncatePages) {
		if err := db.truncate(ctx); err != nil {
			db.log.Debug("truncate skipped", "err", err)
		}
	}
	return db.upload(ctx)
}

// takeWriteLock begins a write transaction on the lock connection, trying
// every few tens of microseconds for up to writeLockWait. SQLite's own busy
// handler sleeps for milliseconds between tries, and an application that
// commits back to back leaves the lock free only for microseconds between
// its transactions: it would never be caught.
func (db *DB) takeWriteLock(ctx context.Context) error {
	db.lock.SetBusyTimeout(0)
	defer db.lock.SetBusyTimeout(busyTimeout)
	deadline := time.Now().Add(writeLockWait)
	for {
		err := exec(ctx, db.lock, "BEGIN IMMEDIATE")
		if sqlite.ErrCode(err).ToPrimary() != sqlite.ResultBusy || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// truncate runs a TRUNCATE checkpoint while keeping the read transaction.
// That is safe whatever the application does meanwhile: a reader at
// read-mark 0 forbids backfilling frames it has not seen, and a reader at any
// other mark forbids the truncation itself, so only a fully backfilled log —
// every frame of which was captured under the write lock — can be truncated.
// The application's commits in between only make the attempt fail (busy).
func (db *DB) truncate(ctx context.Context) error {
	if changed, err := db.walChanged(); err != nil || changed {
		return err // committed since the lock went: it could not succeed
	}
	spare := db.readers[1-db.cur]
	spare.SetBusyTimeout(truncateBusyTimeout)
	busy, _, err := checkpoint(ctx, spare, "TRUNCATE")
	spare.SetBusyTimeout(busyTimeout)
	if err != nil && !errors.Is(err, context.Canceled) && sqlite.ErrCode(err) != sqlite.ResultBusy {
		return fmt.Errorf("truncate WAL of %s: %w", db.path, err)
	}
	db.log.Debug("checkpoint", "mode", "TRUNCATE", "busy", busy)
	return nil
}
