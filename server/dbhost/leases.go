package dbhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
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

// leaseTable tracks this instance's leases and the holders it waits on.
type leaseTable struct {
	log *slog.Logger
	// open opens a database once its waiter took the lease (the host's Get).
	open func(ctx context.Context, name string) error
	mu   sync.Mutex
	opts lease.Options
	held map[string]*lease.Lease
	seen map[string]lease.Record // holder last seen, for databases we wait on
	wait map[string]bool         // a waiter goroutine runs
	ctx  context.Context         // ends on Close: waiters stop
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newLeaseTable(opts lease.Options, log *slog.Logger, open func(ctx context.Context, name string) error) *leaseTable {
	ctx, stop := context.WithCancel(context.Background())
	return &leaseTable{log: log, open: open, opts: opts, held: map[string]*lease.Lease{}, seen: map[string]lease.Record{},
		wait: map[string]bool{}, ctx: ctx, stop: stop}
}

// SetAdvertiseURL sets the URL written into leases taken from now on (the
// listen address is known only once the server listens).
func (h *Host) SetAdvertiseURL(url string) {
	if h.leases != nil {
		h.leases.mu.Lock()
		h.leases.opts.URL = url
		h.leases.mu.Unlock()
	}
}

// Leader returns the holder this instance last saw for name, if it waits on it.
func (h *Host) Leader(name string) (lease.Record, bool) {
	if h.leases == nil {
		return lease.Record{}, false
	}
	h.leases.mu.Lock()
	defer h.leases.mu.Unlock()
	rec, ok := h.leases.seen[name]
	return rec, ok && h.leases.wait[name]
}

// acquire takes name's lease before open (the caller holds name's lock).
// release undoes it if the open fails.
func (t *leaseTable) acquire(ctx context.Context, name string, store replica.Store) (release func(), err error) {
	t.mu.Lock()
	if l := t.held[name]; l != nil && l.Valid() {
		t.mu.Unlock()
		return func() {}, nil // taken by the waiter, which is opening it
	}
	if t.wait[name] {
		rec := t.seen[name]
		t.mu.Unlock()
		return nil, &NotLeaderError{Name: name, Leader: rec}
	}
	opts := t.opts
	t.mu.Unlock()
	l, err := lease.TryAcquire(ctx, store, opts)
	var held *lease.HeldError
	if errors.As(err, &held) {
		t.startWaiter(name, store, held.Record)
		return nil, &NotLeaderError{Name: name, Leader: held.Record}
	}
	if err != nil {
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+": "+err.Error()+"; retry")
	}
	t.mu.Lock()
	t.held[name] = l
	t.mu.Unlock()
	return func() { t.release(name) }, nil
}

// release gives name's lease up (after its last upload).
func (t *leaseTable) release(name string) {
	t.mu.Lock()
	l := t.held[name]
	delete(t.held, name)
	t.mu.Unlock()
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.log.Warn("releasing lease failed", "db", name, "err", err)
	}
}

// startWaiter waits for name's lease in the background, then opens the
// database (restoring what the previous holder shipped).
func (t *leaseTable) startWaiter(name string, store replica.Store, holder lease.Record) {
	t.mu.Lock()
	t.seen[name] = holder
	if t.wait[name] || t.ctx.Err() != nil {
		t.mu.Unlock()
		return
	}
	t.wait[name] = true
	opts := t.opts
	t.wg.Add(1)
	t.mu.Unlock()
	log := t.log.With("db", name)
	log.Info("another instance holds the lease; waiting for it", "holder", holder.Holder, "url", holder.URL, "epoch", holder.Epoch)
	go func() {
		defer t.wg.Done()
		l, err := lease.Acquire(t.ctx, store, opts, func(r lease.Record) {
			t.mu.Lock()
			t.seen[name] = r
			t.mu.Unlock()
		})
		if err != nil { // closing
			t.mu.Lock()
			t.wait[name] = false
			t.mu.Unlock()
			return
		}
		t.mu.Lock()
		t.held[name] = l
		t.wait[name] = false
		delete(t.seen, name)
		t.mu.Unlock()
		log.Info("took the lease; catching up from the bucket", "epoch", l.Record().Epoch)
		if err := t.open(t.ctx, name); err != nil {
			log.Error("opening the database after taking its lease failed; releasing the lease", "err", err)
			t.release(name)
		}
	}()
}

// lease returns name's lease while this instance holds it (nil otherwise).
// The database opened under it releases it when it closes (replicated.DB).
func (t *leaseTable) lease(name string) *lease.Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[name]
}

// demote is the database's reaction to losing l (replicated.Options.
// OnLeaseLost, called once, on its own goroutine): the lease guard already
// refuses every write, so it takes the database out of service, drops its
// local files (the bucket is the truth) and waits for the lease again.
func (h *Host) demote(db *database, l *lease.Lease, cause error) {
	if h.isClosed() {
		return
	}
	log := h.opts.Logger.With("db", db.name)
	log.Error("this instance lost the write role; nothing more is acknowledged here. Dropping the local copy and following the new holder",
		"err", cause)
	unlock := h.lock(db.name)
	h.mu.Lock()
	mine := h.dbs[db.name] == db
	if mine {
		delete(h.dbs, db.name)
	}
	h.mu.Unlock()
	if mine {
		db.commits.Fence()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = db.close(ctx)
		cancel()
		for _, suffix := range localFileSuffixes {
			_ = os.Remove(db.path + suffix)
		}
	}
	h.leases.forget(db.name, l)
	unlock()
	rec, _, _ := lease.Read(context.Background(), db.store)
	h.leases.startWaiter(db.name, db.store, rec)
}

// forget drops l, a lease that was lost, unless name holds another by now.
func (t *leaseTable) forget(name string, l *lease.Lease) {
	t.mu.Lock()
	if t.held[name] == l {
		delete(t.held, name)
	}
	t.mu.Unlock()
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

// closeLeases stops the waiters and releases every lease; call it after
// every database is closed (its last group shipped).
func (t *leaseTable) closeAll() {
	t.stop()
	t.wg.Wait()
	t.mu.Lock()
	names := make([]string, 0, len(t.held))
	for n := range t.held {
		names = append(names, n)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() { defer wg.Done(); t.release(n) }()
	}
	wg.Wait()
}
