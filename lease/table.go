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
	seen    map[string]Record    // holder last seen, for databases waited on
	wait    map[string]bool      // a waiter goroutine runs
	wanted  map[string]time.Time // last TryAcquire of a database waited on: a waiter stops once nobody asks
	wakes   map[string]chan struct{}
	told    map[string]toldRecord // the holder's word on its release (Wake)
	watch   func(ctx context.Context, name string, holder func() Record, self Successor, wake Wake)
	ctx     context.Context // ends on Close: waiters stop
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
	opts = opts.withDefaults()
	return &Table{opts: opts, log: log, onTaken: onTaken, held: map[string]*Lease{}, seen: map[string]Record{},
		wait: map[string]bool{}, wanted: map[string]time.Time{}, wakes: map[string]chan struct{}{},
		told: map[string]toldRecord{}, ctx: ctx, stop: stop}
}

// Wake tells a waiter that the holder released the lease: rec (nil if
// unknown) is the record the bucket now holds, with its ETag, as the
// holder said, so the waiter replaces it conditionally without reading it.
type Wake func(rec *Record, etag string)

type toldRecord struct {
	rec  Record
	etag string
}

// WatchWaits sets fn, started on its own goroutine for each database a
// background waiter waits for, with a context that ends with the wait:
// it may learn of the holder's release sooner than a poll would (the
// server subscribes to the holder) and calls wake then. holder returns
// the holder last seen; self is this waiter, which the holder may hand the
// lease to (Lease.HandTo). Set it before the first TryAcquire.
func (t *Table) WatchWaits(fn func(ctx context.Context, name string, holder func() Record, self Successor, wake Wake)) {
	t.mu.Lock()
	t.watch = fn
	t.mu.Unlock()
}

// Nudge makes name's waiter, if any, try to take the lease now.
func (t *Table) Nudge(name string) {
	t.mu.Lock()
	ch := t.wakes[name]
	t.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// nudgeWith is Nudge with the holder's word on the record it released.
func (t *Table) nudgeWith(name string, rec *Record, etag string) {
	if rec != nil && etag != "" {
		t.mu.Lock()
		t.told[name] = toldRecord{*rec, etag}
		t.mu.Unlock()
	}
	t.Nudge(name)
}

// toldFor returns and forgets what a holder said of name's released record.
func (t *Table) toldFor(name string) (Record, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.told[name]
	delete(t.told, name)
	return r.rec, r.etag, ok
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
	t.wanted[name] = time.Now()
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
		t.requestTakeover(ctx, name, store, held.Record)
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

// requestTakeover asks an older holder to hand name over (a deploy's new
// instance wins); an error only delays the request to the next poll.
func (t *Table) requestTakeover(ctx context.Context, name string, store replica.Store, holder Record) {
	t.mu.Lock()
	opts := t.opts
	t.mu.Unlock()
	if holder.Holder == opts.Holder || !newer(opts.Started, opts.Holder, holder.Started, holder.Holder) {
		return
	}
	if r := holder.Takeover; r != nil && r.Holder == opts.Holder && time.Now().Before(r.Until) {
		return // asked already
	}
	if _, err := RequestTakeover(ctx, store, opts); err != nil {
		t.log.Warn("asking the lease holder to hand over failed; asking again at the next poll", "db", name, "err", err)
	}
}

// waitInterest is how long a waiter keeps polling a held lease after the
// last request for its database: an instance nobody asks for a database
// stops polling it (idle costs nothing); the next request starts again.
func (t *Table) waitInterest() time.Duration { return 3 * t.opts.TTL }

// Wait waits for name's lease in the background (once per name), asking
// an older holder to hand over, then hands the database to OnTaken. It
// gives up once nobody has asked for the database for waitInterest.
// holder is the one seen last.
func (t *Table) Wait(name string, store replica.Store, holder Record) {
	t.mu.Lock()
	t.seen[name] = holder
	if t.wait[name] || t.ctx.Err() != nil || t.onTaken == nil {
		t.mu.Unlock()
		return
	}
	t.wait[name] = true
	if _, ok := t.wanted[name]; !ok {
		t.wanted[name] = time.Now()
	}
	opts := t.opts
	wake := make(chan struct{}, 1)
	t.wakes[name] = wake
	watch := t.watch
	t.wg.Add(1)
	t.mu.Unlock()
	log := t.log.With("db", name)
	log.Info("another instance holds the lease; waiting for it", "holder", holder.Holder, "url", holder.URL, "epoch", holder.Epoch)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithCancel(t.ctx)
		defer cancel()
		defer func() {
			t.mu.Lock()
			if t.wakes[name] == wake {
				delete(t.wakes, name)
				delete(t.told, name)
			}
			t.mu.Unlock()
		}()
		if watch != nil {
			seen := func() Record {
				t.mu.Lock()
				defer t.mu.Unlock()
				return t.seen[name]
			}
			self := Successor{Holder: opts.Holder, URL: opts.URL, Started: opts.Started}
			go watch(ctx, name, seen, self, func(rec *Record, etag string) { t.nudgeWith(name, rec, etag) })
		}
		l, err := acquire(ctx, store, opts, func(r Record) {
			t.mu.Lock()
			t.seen[name] = r
			idle := time.Since(t.wanted[name]) > t.waitInterest()
			t.mu.Unlock()
			if idle {
				cancel()
				return
			}
			t.requestTakeover(ctx, name, store, r)
		}, wake, func() (Record, string, bool) { return t.toldFor(name) })
		if err != nil { // closing, or nobody asks any more
			t.mu.Lock()
			t.wait[name] = false
			delete(t.wanted, name)
			t.mu.Unlock()
			if t.ctx.Err() == nil {
				log.Info("stopped waiting for the lease: no request for the database any more")
			}
			return
		}
		t.mu.Lock()
		t.held[name] = l
		t.wait[name] = false
		delete(t.seen, name)
		delete(t.wanted, name)
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

// Discard drops name's lease and deletes its object (Lease.Discard): for
// an open that found no such database.
func (t *Table) Discard(name string) {
	l := t.Take(name)
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Discard(ctx); err != nil {
		t.log.Warn("deleting the lease of a database that does not exist failed", "db", name, "err", err)
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
