package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// SidecarOptions tunes a Sidecar. The zero value is usable.
type SidecarOptions struct {
	Interval time.Duration // longest time a change waits before it is shipped (default 1s)
	Logger   *slog.Logger
	OnShip   func(f replica.LTXFile, body []byte) // as Options.OnShip
	// ErrorBudget is how long uploads may keep failing while there is
	// something to ship before Run gives up with ErrReplicaUnavailable.
	// Zero: never give up (keep retrying).
	ErrorBudget time.Duration
	// OnResult, if set, learns the outcome of every attempt that reached
	// the store (for readiness); idle ticks make no request and report nothing.
	OnResult func(error)
}

// ErrReplicaUnavailable: the store took no upload for longer than the
// sidecar's error budget while changes waited to be shipped.
var ErrReplicaUnavailable = errors.New("replica unavailable: changes are not being shipped")

// UnavailableError is the error budget running out: no upload accepted for
// For, the last failure being Err. It matches ErrReplicaUnavailable.
type UnavailableError struct {
	For time.Duration
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("no upload accepted for %s: %v", e.For.Round(time.Second), e.Err)
}

func (e *UnavailableError) Is(target error) bool { return target == ErrReplicaUnavailable }
func (e *UnavailableError) Unwrap() error        { return e.Err }

// finalSyncTimeout bounds the last Sync after cancellation.
const finalSyncTimeout = 30 * time.Second

// Retry delays after a failed upload: exponential with jitter, so a store
// that is down is not asked ten times a second by every sidecar.
const (
	minRetryDelay = time.Second
	maxRetryDelay = 30 * time.Second
)

// Sidecar is the loop of `sluice replicate` and `sluice run` for one database
// written by another process (the application).
type Sidecar struct {
	path  string
	store replica.Store
	opts  SidecarOptions
	log   *slog.Logger

	mu     sync.Mutex
	db     *DB
	health Health
}

// Health is what a sidecar loop reports for readiness and metrics.
type Health struct {
	Pos            ltx.Pos   // position the store accepted
	LastOK         time.Time // last upload or open the store accepted; zero before the first
	FailingSince   time.Time // first failure since LastOK; zero while healthy
	LastErr        error     // the latest failure, nil while healthy
	Errors         int64     // failed attempts since start
	UnshippedBytes int64     // size of the captured file waiting for the store
	UnshippedPages int64     // pages in it
}

// NewSidecar prepares a loop replicating the database at path into store.
func NewSidecar(path string, store replica.Store, opts SidecarOptions) *Sidecar {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Sidecar{path: path, store: store, opts: opts, log: opts.Logger.With("db", path)}
}

// Pos returns the position the store has accepted (zero before the first Open).
func (r *Sidecar) Pos() ltx.Pos {
	r.mu.Lock()
	db := r.db
	r.mu.Unlock()
	if db == nil {
		return ltx.Pos{}
	}
	return db.Pos()
}

// Snapshot uploads the database as a level-9 snapshot at its shipped TXID
// (DB.Snapshot): how the sidecar heals a damaged replica.
func (r *Sidecar) Snapshot(ctx context.Context) (replica.LTXFile, error) {
	r.mu.Lock()
	db := r.db
	r.mu.Unlock()
	if db == nil {
		return replica.LTXFile{}, fmt.Errorf("database %s is not replicating yet", r.path)
	}
	return db.Snapshot(ctx)
}

// Health returns the sidecar loop's current state.
func (r *Sidecar) Health() Health {
	r.mu.Lock()
	h := r.health
	db := r.db
	r.mu.Unlock()
	if db != nil {
		h.Pos = db.Pos()
		// What waits now, not after the attempt in flight ends: an upload to
		// a stalled store takes up to its deadline, and the metrics and
		// /ready must show the commit waiting meanwhile.
		h.UnshippedBytes, h.UnshippedPages = db.Unshipped()
	}
	return h
}

// record notes the outcome of one attempt to reach the store, begun at start.
func (r *Sidecar) record(err error, start time.Time) {
	if r.opts.OnResult != nil {
		r.opts.OnResult(err)
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.health.LastOK, r.health.FailingSince, r.health.LastErr = now, time.Time{}, nil
		return
	}
	r.health.Errors++
	r.health.LastErr = err
	if r.health.FailingSince.IsZero() {
		r.health.FailingSince = start
	}
}

// overBudget reports whether failures have lasted longer than the budget.
func (r *Sidecar) overBudget() (time.Duration, bool) {
	if r.opts.ErrorBudget <= 0 {
		return 0, false
	}
	r.mu.Lock()
	since := r.health.FailingSince
	r.mu.Unlock()
	if since.IsZero() {
		return 0, false
	}
	d := time.Since(since)
	return d, d > r.opts.ErrorBudget
}

// retryDelay is the wait before attempt n+1 after n consecutive failures:
// 1s, 2s, 4s … capped at 30s, each with ±25% jitter.
func retryDelay(n int) time.Duration {
	d := minRetryDelay << min(n-1, 5)
	d = min(d, maxRetryDelay)
	return d - d/4 + rand.N(d/2+1)
}

// nextTry is the wait before the next attempt: the backoff, but never past
// the end of the error budget, so the last try happens when it expires.
func (r *Sidecar) nextTry(poll time.Duration, failures int) time.Duration {
	d := max(poll, retryDelay(failures))
	if r.opts.ErrorBudget > 0 {
		r.mu.Lock()
		left := r.opts.ErrorBudget - time.Since(r.health.FailingSince)
		r.mu.Unlock()
		d = max(min(d, left+10*time.Millisecond), 10*time.Millisecond)
	}
	return d
}

// Run waits for the database file to exist, opens it and ships changes within
// Interval: every Interval it calls Sync, whose idle check reads two headers
// of the WAL and makes no store request when nothing changed. After a failed
// upload it retries with exponential backoff; once failures outlast
// ErrorBudget it returns an error wrapping ErrReplicaUnavailable. When ctx is
// cancelled it ships what is left, closes and returns nil (or the final
// Sync's error). It returns an error wrapping ErrFenced as soon as another
// writer owns the replica.
func (r *Sidecar) Run(ctx context.Context) error {
	poll := r.opts.Interval
	db, err := r.open(ctx, poll)
	if db == nil {
		return err
	}
	r.mu.Lock()
	r.db = db
	r.mu.Unlock()

	failures, shipped := 0, db.Pos()
	timer := time.NewTimer(poll)
	defer timer.Stop()
	// A writer going flat out does not wait for the interval: once the log
	// holds earlyShipBytes past the last capture it is shipped at once, so
	// what a crash could lose stays well under a second of its writes.
	early := time.NewTicker(earlyShipCheck)
	defer early.Stop()
	for {
		select {
		case <-early.C:
			if failures > 0 || db.walAhead() < earlyShipBytes {
				continue
			}
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncTimeout)
			defer cancel()
			replaced := db.replacedError()
			closeStart := time.Now()
			err := db.Close(fctx)
			r.record(err, closeStart)
			if err != nil {
				return fmt.Errorf("final sync of %s: %w", r.path, err)
			}
			return replaced
		case <-timer.C:
		}
		if err := db.replacedError(); err != nil {
			_ = db.Close(context.WithoutCancel(ctx))
			return err
		}
		// An upload in flight when the signal arrives is finished, not cancelled:
		// a cancelled PUT may still land, and the final Sync must not race it.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncTimeout)
		attempt := time.Now()
		pos, err := db.Sync(sctx)
		cancel()
		if errors.Is(err, ErrFenced) {
			_ = db.Close(context.WithoutCancel(ctx))
			return err
		}
		// With nothing new, Sync makes no request: a nil error then says
		// nothing about the store, so only a real upload counts as success.
		if err != nil || failures > 0 || pos != shipped {
			r.record(err, attempt)
			shipped = pos
		}
		if err == nil {
			failures = 0
			// The interval runs from this sync's start, not its end: under
			// a steady writer a sync every Interval, not every Interval
			// plus the time to capture and upload.
			timer.Reset(max(poll-time.Since(attempt), 0))
			continue
		}
		failures++
		if d, over := r.overBudget(); over {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = db.Close(cctx) // one last try, bounded; the error is the one below
			cancel()
			return &UnavailableError{For: d, Err: err}
		}
		if ctx.Err() == nil {
			r.log.Warn("upload failed; retrying", "err", err, "attempt", failures)
		}
		timer.Reset(r.nextTry(poll, failures))
	}
}

// earlyShipBytes of new WAL ship before the interval ends; the log is
// looked at every earlyShipCheck.
const (
	earlyShipBytes = 16 << 20
	earlyShipCheck = 100 * time.Millisecond
)

// open waits for the file and opens it (Open ships its first file),
// retrying failures with backoff. It returns a nil DB when ctx ends before
// the file exists (with a nil error), on ErrFenced, and once failures outlast
// the error budget. If the file appears, it is opened even when ctx has just
// ended, so a short-lived app's writes are not skipped; if that last try
// fails too, the error says the database was not replicated.
func (r *Sidecar) open(ctx context.Context, poll time.Duration) (*DB, error) {
	poll = min(poll, 100*time.Millisecond) // a new database should not wait a whole interval
	waiting, finalTry := false, false
	failures := 0
	var lastErr error
	for {
		delay := poll
		if _, err := os.Stat(r.path); err == nil {
			octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSyncTimeout)
			attempt := time.Now()
			db, err := Open(octx, r.path, r.store, Options{Logger: r.opts.Logger, OnShip: r.opts.OnShip})
			cancel()
			if err == nil {
				r.record(nil, attempt)
				return db, nil
			}
			if errors.Is(err, ErrFenced) || errors.Is(err, ErrDiverged) || errors.Is(err, ErrNotDatabase) {
				return nil, err
			}
			r.record(err, attempt)
			lastErr = err
			failures++
			if d, over := r.overBudget(); over {
				return nil, &UnavailableError{For: d, Err: err}
			}
			if finalTry {
				return nil, fmt.Errorf("%s was not replicated: %w", r.path, err)
			}
			if ctx.Err() == nil {
				r.log.Warn("cannot start replicating; retrying", "err", err, "attempt", failures)
			}
			delay = r.nextTry(poll, failures)
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
			if lastErr != nil {
				return nil, fmt.Errorf("%s was not replicated: %w", r.path, lastErr)
			}
			return nil, nil
		case <-time.After(delay):
		}
	}
}
