package forward

import (
	"context"
	"sync"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
)

// nextWriterPoll is how often a released writer reads a database's lease
// while requests wait to be proxied to whoever takes it next: a new holder
// is open within milliseconds of its conditional write (it opens its own
// follower's copy), so every poll interval here is hand-over gap. One
// reader per database serves every waiting request.
const nextWriterPoll = 10 * time.Millisecond

// leaseWatches are the per-database readers of nextWriter.
type leaseWatches struct {
	mu   sync.Mutex
	m    map[string]*leaseWatch
	told map[string]lease.Record // what this instance released each lease with (Released)
}

// leaseWatch is one database's reader and what it read last.
type leaseWatch struct {
	waiters int
	rec     lease.Record
	read    bool
	changed chan struct{} // closed and replaced after every read
}

// Released tells the forwarder the record this instance released name's
// lease with: when it names the next holder (a hand-over), requests waiting
// for one go there at once, without a read of the lease.
func (f *Forwarder) Released(name string, rec lease.Record) {
	f.watches.mu.Lock()
	defer f.watches.mu.Unlock()
	if f.watches.told == nil {
		f.watches.told = map[string]lease.Record{}
	}
	f.watches.told[name] = rec
	if w := f.watches.m[name]; w != nil {
		w.rec, w.read = rec, true
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// nextWriter returns name's lease once it names a live holder other than
// this instance, or ctx's error.
func (f *Forwarder) nextWriter(ctx context.Context, name string) (lease.Record, error) {
	w := f.watches.join(name, func(ctx context.Context) (lease.Record, error) {
		rec, _, err := lease.Read(ctx, replica.Sub(f.cfg.Store, name))
		return rec, err
	})
	defer f.watches.leave(name)
	for {
		f.watches.mu.Lock()
		rec, read, changed := w.rec, w.read, w.changed
		f.watches.mu.Unlock()
		if read && rec.URL != "" && rec.URL != f.self && !rec.Expired(time.Now()) && !rec.Released() {
			return rec, nil
		}
		select {
		case <-ctx.Done():
			return lease.Record{}, ctx.Err()
		case <-changed:
		}
	}
}

// join registers a waiter on name's watch, starting its reader if none runs.
func (ws *leaseWatches) join(name string, read func(context.Context) (lease.Record, error)) *leaseWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.m == nil {
		ws.m = map[string]*leaseWatch{}
	}
	w := ws.m[name]
	if w == nil {
		w = &leaseWatch{changed: make(chan struct{})}
		w.rec, w.read = ws.told[name]
		ws.m[name] = w
		go ws.poll(name, w, read)
	}
	w.waiters++
	return w
}

func (ws *leaseWatches) leave(name string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.m[name].waiters--
}

// poll reads name's lease every nextWriterPoll until nobody waits.
func (ws *leaseWatches) poll(name string, w *leaseWatch, read func(context.Context) (lease.Record, error)) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rec, err := read(ctx)
		cancel()
		ws.mu.Lock()
		if err == nil {
			w.rec, w.read = rec, true
		}
		close(w.changed)
		w.changed = make(chan struct{})
		if w.waiters == 0 {
			delete(ws.m, name)
			ws.mu.Unlock()
			return
		}
		ws.mu.Unlock()
		time.Sleep(nextWriterPoll)
	}
}
