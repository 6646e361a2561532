package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// Table is the set of leases one process holds, by database name, and the
// holders it waits on. With an OnTaken callback, TryAcquire on a held lease
// starts a background waiter that takes the lease once it frees and hands
// the database to OnTaken; without one, a held lease is only an error.
type Table struct {
	opts    Options
	log     *slog.Logger
	onTaken func(ctx context.Context, name string) error
	mu      sync.Mutex
	held    map[string]*Lease
	seen    map[string]Record // holder last seen, for databases waited on
	wait    map[string]bool   // a waiter goroutine runs
	ctx     context.Context   // ends on Close: waiters stop
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// NewTable returns a table taking leases with opts. onTaken (may be nil)
// opens a database whose lease a background waiter took; if it fails, the
// lease is released.
func NewTable(opts Options, log *slog.Logger, onTaken func(ctx context.Context, name string) error) *Table {
	if log == nil {
		log = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Table{opts: opts, log: log, onTaken: onTaken, held: map[string]*Lease{}, seen: map[string]Record{},
		wait: map[string]bool{}, ctx: ctx, stop: stop}
}

// SetURL sets the URL written into leases taken from now on.
func (t *Table) SetURL(url string) {
	t.mu.Lock()
	t.opts.URL = url
	t.mu.Unlock()
}

// Holder returns the holder last seen for name while a waiter waits on it.
func (t *Table) Holder(name string) (Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rec, ok := t.seen[name]
	return rec, ok && t.wait[name]
}

// TryAcquire takes name's lease on store unless this process holds it
// already. A lease held elsewhere (or waited on) is a *HeldError; with
// OnTaken set, a waiter then takes it in the background. release undoes
// the acquisition (for a caller whose open fails).
func (t *Table) TryAcquire(ctx context.Context, name string, store replica.Store) (release func(), err error) {
	t.mu.Lock()
	if l := t.held[name]; l != nil && l.Valid() {
		t.mu.Unlock()
		return func() {}, nil // taken by the waiter, which is opening it
	}
	if t.wait[name] {
		rec := t.seen[name]
		t.mu.Unlock()
		return nil, &HeldError{Store: store.String(), Record: rec}
	}
	opts := t.opts
	t.mu.Unlock()
	l, err := TryAcquire(ctx, store, opts)
	var held *HeldError
	if errors.As(err, &held) && t.onTaken != nil {
		t.Wait(name, store, held.Record)
	}
	if err != nil {
		return nil, err
	}
	t.put(name, l)
	return func() { t.Release(name) }, nil
}

// Acquire waits until name's lease is free and takes it (see the function
// Acquire; onHeld may be nil), unless this process holds it already.
func (t *Table) Acquire(ctx context.Context, name string, store replica.Store, onHeld func(Record)) error {
	t.mu.Lock()
	have := t.held[name] != nil
	opts := t.opts
	t.mu.Unlock()
	if have {
		return nil
	}
	l, err := Acquire(ctx, store, opts, onHeld)
	if err != nil {
		return err
	}
	t.put(name, l)
	return nil
}

func (t *Table) put(name string, l *Lease) {
	t.mu.Lock()
	t.held[name] = l
	t.mu.Unlock()
}

// Wait waits for name's lease in the background (once per name), then
// hands the database to OnTaken. holder is the one seen last.
func (t *Table) Wait(name string, store replica.Store, holder Record) {
	t.mu.Lock()
	t.seen[name] = holder
	if t.wait[name] || t.ctx.Err() != nil || t.onTaken == nil {
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
		l, err := Acquire(t.ctx, store, opts, func(r Record) {
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
		if err := t.onTaken(t.ctx, name); err != nil {
			log.Error("opening the database after taking its lease failed; releasing the lease", "err", err)
			t.Release(name)
		}
	}()
}

// Lease returns name's lease while this process holds it (nil otherwise).
func (t *Table) Lease(name string) *Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held[name]
}

// Take removes name's lease from the table and returns it (nil if not
// held): its new owner releases it.
func (t *Table) Take(name string) *Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.held[name]
	delete(t.held, name)
	return l
}

// Forget drops l, a lease that was lost, unless name holds another by now.
func (t *Table) Forget(name string, l *Lease) {
	t.mu.Lock()
	if t.held[name] == l {
		delete(t.held, name)
	}
	t.mu.Unlock()
}

// Release gives name's lease up, so a waiter takes it at its next poll.
func (t *Table) Release(name string) {
	l := t.Take(name)
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.log.Warn("releasing the lease failed; the next holder waits for it to expire", "db", name, "err", err)
	}
}

// Close stops the waiters and releases every lease still in the table.
func (t *Table) Close() {
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
		go func() { defer wg.Done(); t.Release(n) }()
	}
	wg.Wait()
}
