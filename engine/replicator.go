package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// ReplicatorOptions tunes a Replicator. The zero value is usable.
type ReplicatorOptions struct {
	Interval time.Duration // longest time a change waits before it is shipped (default 1s)
	Logger   *slog.Logger
	OnShip   func(replica.LTXFile)
}

// finalSyncTimeout bounds the last Sync after cancellation.
const finalSyncTimeout = 30 * time.Second

// Replicator is the sidecar loop for one database written by another process.
type Replicator struct {
	path  string
	store replica.Store
	opts  ReplicatorOptions
	log   *slog.Logger

	mu sync.Mutex
	db *DB
}

// NewReplicator prepares a loop replicating the database at path into store.
func NewReplicator(path string, store replica.Store, opts ReplicatorOptions) *Replicator {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Replicator{path: path, store: store, opts: opts, log: opts.Logger.With("db", path)}
}

// Pos returns the position the store has accepted (zero before the first Open).
func (r *Replicator) Pos() ltx.Pos {
	r.mu.Lock()
	db := r.db
	r.mu.Unlock()
	if db == nil {
		return ltx.Pos{}
	}
	return db.Pos()
}

// Run waits for the database file to exist, opens it and ships changes within
// Interval: every Interval it calls Sync, whose idle check reads two headers
// of the WAL and makes no store request when nothing changed. When ctx is cancelled it ships
// what is left, closes and returns nil (or the final Sync's error). It returns
// an error wrapping ErrFenced as soon as another writer owns the replica.
func (r *Replicator) Run(ctx context.Context) error {
	poll := r.opts.Interval
	db, err := r.open(ctx, poll)
	if db == nil {
		return err
	}
	r.mu.Lock()
	r.db = db
	r.mu.Unlock()

	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncTimeout)
			defer cancel()
			if err := db.Close(fctx); err != nil {
				return fmt.Errorf("final sync of %s: %w", r.path, err)
			}
			return nil
		case <-ticker.C:
		}
		// An upload in flight when the signal arrives is finished, not cancelled:
		// a cancelled PUT may still land, and the final Sync must not race it.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncTimeout)
		_, err := db.Sync(sctx)
		cancel()
		if errors.Is(err, ErrFenced) {
			_ = db.Close(context.WithoutCancel(ctx))
			return err
		} else if err != nil && ctx.Err() == nil {
			r.log.Warn("sync failed; retrying", "err", err)
		}
	}
}

// open waits for the file and opens it, retrying transient failures. It
// returns a nil DB when ctx ends before the file exists (with a nil error) or
// on ErrFenced. If the file appears, it is opened (and its first file shipped)
// even when ctx has just ended, so a short-lived app's writes are not skipped.
func (r *Replicator) open(ctx context.Context, poll time.Duration) (*DB, error) {
	poll = min(poll, 100*time.Millisecond) // a new database should not wait a whole interval
	waiting, finalTry := false, false
	for {
		if _, err := os.Stat(r.path); err == nil {
			octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncTimeout)
			db, err := Open(octx, r.path, r.store, Options{Logger: r.opts.Logger, OnShip: r.opts.OnShip})
			cancel()
			if err == nil {
				return db, nil
			}
			if errors.Is(err, ErrFenced) || errors.Is(err, ErrDiverged) {
				return nil, err
			}
			if ctx.Err() == nil {
				r.log.Warn("cannot start replicating; retrying", "err", err)
			}
		} else if !waiting {
			r.log.Info("waiting for the database file to exist")
			waiting = true
		}
		select {
		case <-ctx.Done():
			if _, err := os.Stat(r.path); err == nil && !finalTry {
				finalTry = true
				continue // the file exists: one last open so the final Sync ships it
			}
			return nil, nil
		case <-time.After(poll):
		}
	}
}
