package dbhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
)

// Leases: with Options.Lease set, a database is opened for writing only by
// the instance holding its lease (package lease). An instance that finds the
// lease held answers with a *NotLeaderError naming the holder (the server
// forwards the request there) and waits for the lease in the background;
// once it has it, it catches up from the bucket (the engine finds the local
// file behind and it is restored) and opens the database. A holder that
// loses its lease, or is fenced by the conditional create of an LTX file,
// stops writing (its store refuses writes: lease.GuardStore, through
// package replicated), drops its local copy and goes back to waiting.

// NotLeaderError says which instance holds a database's lease. It unwraps
// to a retryable NOT_LEADER *dberr.Error for callers that do not forward.
type NotLeaderError struct {
	Name   string
	Leader lease.Record
}

func (e *NotLeaderError) Error() string { return e.Unwrap().Error() }

func (e *NotLeaderError) Unwrap() error {
	return dberr.ForDatabase(dberr.CodeNotLeader, e.Name, fmt.Sprintf(
		"database %s is written by another instance (%s at %s, lease epoch %d); send writes there or retry",
		quote(e.Name), e.Leader.Holder, e.Leader.URL, e.Leader.Epoch))
}

// SetAdvertiseURL sets the URL written into leases taken from now on (the
// listen address is known only once the server listens).
func (h *Host) SetAdvertiseURL(url string) {
	if h.leases != nil {
		h.leases.SetURL(url)
	}
}

// Leader returns the holder this instance last saw for name, if it waits on it.
func (h *Host) Leader(name string) (lease.Record, bool) {
	if h.leases == nil {
		return lease.Record{}, false
	}
	return h.leases.Holder(name)
}

// acquireLease takes name's lease before open (the caller holds name's
// lock); another holder is a *NotLeaderError. release undoes it if the open
// fails.
func (h *Host) acquireLease(ctx context.Context, name string, store replica.Store) (release func(), err error) {
	release, err = h.leases.TryAcquire(ctx, name, store)
	var held *lease.HeldError
	if errors.As(err, &held) {
		return nil, &NotLeaderError{Name: name, Leader: held.Record}
	}
	if err != nil {
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+": "+err.Error()+"; retry")
	}
	return release, nil
}

// demote is the database's reaction to losing l (replicated.Options.
// OnLeaseLost, called once, on its own goroutine): the lease guard already
// refuses every write, so it takes the database out of service and drops
// its local files (the bucket is the truth; its unshipped commits were
// never acknowledged). The next request asks for the lease again and, the
// lease being held elsewhere, goes to the writer.
func (h *Host) demote(db *database, l *lease.Lease, cause error) {
	if h.isClosed() {
		return
	}
	h.opts.Logger.Warn("this instance lost the write role; nothing more is acknowledged here. Dropping the local copy; requests go to the new writer",
		"db", db.name, "err", cause)
	h.retireWriter(db, l, true, false)
}

// handOver is the database's reaction to a takeover request from a newer
// instance (replicated.Options.OnHandOver): it finishes what is queued,
// ships it and closes, which releases the lease reserved for the
// requester. The local file matches the bucket and stays.
func (h *Host) handOver(db *database, l *lease.Lease) {
	if h.isClosed() {
		return
	}
	h.opts.Logger.Info("handing the database over to a newer instance", "db", db.name)
	h.retireWriter(db, l, false, false)
}

// adoptHistory is the reaction to a fenced upload while the lease still
// holds (replicated.Options.OnHistoryTaken): the previous holder's late
// file took the TXID. That file is in the one history (its writer may have
// acknowledged it); this instance's unshipped commits are not (they were
// answered retryable, never acknowledged). It drops the local copy and
// reopens from the bucket under the same lease.
func (h *Host) adoptHistory(db *database, l *lease.Lease, cause error) {
	if h.isClosed() {
		return
	}
	h.opts.Logger.Warn("a previous writer's late upload took the next TXID; adopting it: this instance's unshipped commits (never acknowledged) are dropped and the database catches up from the bucket",
		"db", db.name, "err", cause)
	if h.retireWriter(db, l, true, true) && l.Valid() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := h.Get(ctx, db.name); err != nil {
			h.opts.Logger.Warn("reopening after adopting the previous writer's upload failed; the next request tries again", "db", db.name, "err", err)
		}
	}
}

// retireWriter takes db out of the table and closes it (queued writes are
// run and shipped, or answered retryable once fenced); drop removes the
// local files, keep leaves the lease held. It reports whether db was still
// this host's.
func (h *Host) retireWriter(db *database, l *lease.Lease, drop, keep bool) bool {
	unlock := h.lock(db.name)
	defer unlock()
	h.mu.Lock()
	mine := h.dbs[db.name] == db && !h.closed
	if mine {
		delete(h.dbs, db.name)
		h.evicting.Add(1)
	}
	h.mu.Unlock()
	if mine {
		defer h.evicting.Done()
		if drop {
			db.commits.Fence()
		}
		db.keepLease.Store(keep)
		db.retiring.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := db.retire(ctx); err != nil {
			h.opts.Logger.Warn("closing the database as it stops being the writer", "db", db.name, "err", err)
		}
		cancel()
		if drop {
			for _, suffix := range localFileSuffixes {
				_ = os.Remove(db.path + suffix)
			}
		}
	}
	if !keep { // the close released it (or it was lost)
		h.leases.Forget(db.name, l)
	}
	return mine
}

// followOnlyLeader is Get's answer in FollowOnly mode: the current lease
// holder, for the server to forward writes to.
func (h *Host) followOnlyLeader(ctx context.Context, name string) error {
	rec, _, _ := lease.Read(ctx, replica.Sub(h.opts.Store, name))
	return &NotLeaderError{Name: name, Leader: rec}
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// HeldLease returns name's lease while this instance holds it (nil
// otherwise, and always without leases): the writer's push stream lasts
// as long as it.
func (h *Host) HeldLease(name string) *lease.Lease {
	if h.leases == nil {
		return nil
	}
	return h.leases.Lease(name)
}

// WatchLeaseWaits sets what runs while this instance waits for a
// database's lease (lease.Table.WatchWaits): the server listens there for
// the holder's release. Without leases it does nothing.
func (h *Host) WatchLeaseWaits(fn func(ctx context.Context, name string, holder func() lease.Record, self lease.Successor, wake lease.Wake)) {
	if h.leases != nil {
		h.leases.WatchWaits(fn)
	}
}
