package lease

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// A waiter polling coarsely still takes a crashed holder's lease at its
// expiry, not up to a poll later.
func TestCrashedHolderIsReplacedAtItsExpiry(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		a, err := TryAcquire(ctx, store, opts("a"))
		if err != nil {
			t.Fatal(err)
		}
		a.crash()
		expires := a.Record().Expires
		ob := opts("b")
		ob.Poll = 5 * time.Second
		b, err := Acquire(ctx, store, ob, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release(ctx)
		late := time.Since(expires)
		t.Logf("took the crashed holder's lease %s after its expiry (poll %s)", late.Round(time.Millisecond), ob.Poll)
		if late < 0 || late > 500*time.Millisecond { // the poll is 5 s; the margin is for a loaded machine
			t.Fatalf("took the lease %s after the holder's expiry, want within 500ms", late)
		}
	})
}

// A table's waiter told that the holder released (the server learns it
// from the holder's push stream) takes the lease at once, though its poll
// is seconds; Released closes only once the bucket says released.
func TestToldWaiterTakesTheReleasedLeaseAtOnce(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		oa := opts("a")
		oa.TTL = 10 * time.Second
		a, err := TryAcquire(ctx, store, oa)
		if err != nil {
			t.Fatal(err)
		}
		ob := opts("b")
		ob.TTL, ob.Poll = 10*time.Second, 5*time.Second
		taken := make(chan time.Time, 1)
		b := NewTable(ob, nil, func(context.Context, string) error { taken <- time.Now(); return nil })
		defer b.Close()
		watched := make(chan string, 1)
		b.WatchWaits(func(ctx context.Context, name string, holder func() Record, _ Successor, wake Wake) {
			watched <- holder().Holder
			select {
			case <-a.Released():
				if rec, _, err := Read(ctx, store); err != nil || !rec.Released() {
					t.Errorf("Released closed while the bucket says %+v, %v", rec, err)
				}
				wake(nil, "")
			case <-ctx.Done():
			}
		})
		if _, err := b.TryAcquire(ctx, "db", store); err == nil {
			t.Fatal("b took a held lease")
		}
		if h := <-watched; h != "a" {
			t.Fatalf("the watcher saw holder %q, want a", h)
		}
		time.Sleep(100 * time.Millisecond) // b is in its 5 s sleep
		released := time.Now()
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-taken:
			gap := at.Sub(released)
			t.Logf("the told waiter took the lease %s after the release began (poll %s)", gap.Round(time.Millisecond), ob.Poll)
			if gap > time.Second {
				t.Fatalf("took the lease %s after the release, want well within the 5s poll", gap)
			}
		case <-time.After(4 * time.Second):
			t.Fatal("the told waiter did not take the lease before its poll")
		}
	})
}

// getCounter counts the store's reads of the lease object.
type getCounter struct {
	replica.Store
	gets atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == Key {
		g.gets.Add(1)
	}
	return g.Store.Get(ctx, key)
}

// A waiter told the released record and its ETag (the holder's push says
// them) takes the lease without reading it first, and learns the position
// the holder released it at; told a stale ETag, it reads and still takes it.
func TestToldRecordSkipsTheReadAndCarriesTheFinalPosition(t *testing.T) {
	stores(t, func(t *testing.T, base replica.Store) {
		for _, stale := range []bool{false, true} {
			ctx := context.Background()
			store := &getCounter{Store: base}
			a, err := TryAcquire(ctx, store, opts("a"))
			if err != nil {
				t.Fatal(err)
			}
			ob := opts("b")
			ob.Poll = 5 * time.Second
			taken := make(chan *Lease, 1)
			var b *Table
			b = NewTable(ob, nil, func(context.Context, string) error { taken <- b.Lease("db"); return nil })
			b.WatchWaits(func(ctx context.Context, name string, holder func() Record, _ Successor, wake Wake) {
				select {
				case <-a.Released():
					rec, etag := a.ReleasedAs()
					if stale {
						etag = `"not-the-stored-etag"`
					}
					wake(&rec, etag)
				case <-ctx.Done():
				}
			})
			if _, err := b.TryAcquire(ctx, "db", store); err == nil {
				t.Fatal("b took a held lease")
			}
			time.Sleep(100 * time.Millisecond) // b is in its 5 s sleep
			before := store.gets.Load()
			if err := a.ReleaseAt(ctx, Final{TXID: 42, Checksum: 0xc0ffee}); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-taken:
				reads := store.gets.Load() - before
				// a's release reads nothing; b's take reads only when told wrong.
				if want := map[bool]int64{false: 0, true: 2}[stale]; reads != want {
					t.Errorf("stale=%v: %d reads of the lease object between the release and the take, want %d", stale, reads, want)
				}
				if f, ok := l.Handed(); !ok || f != (Final{TXID: 42, Checksum: 0xc0ffee}) {
					t.Errorf("stale=%v: Handed() = %+v, %v; want the released position", stale, f, ok)
				}
				if l.Record().Final != nil {
					t.Errorf("the new holder's record carries the old position: %+v", l.Record())
				}
				l.Release(ctx)
			case <-time.After(4 * time.Second):
				t.Fatalf("stale=%v: the told waiter did not take the lease before its poll", stale)
			}
			b.Close()
		}
	})
}

// A lease taken from a plain release, an expiry or an empty bucket hands
// no position over.
func TestNoFinalPositionWithoutAReleaseThatSaysOne(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		a, err := TryAcquire(ctx, store, opts("a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := a.Handed(); ok {
			t.Error("a lease taken from an empty bucket says a position was handed over")
		}
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		b, err := TryAcquire(ctx, store, opts("b"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.Handed(); ok {
			t.Error("a lease taken from a plain release says a position was handed over")
		}
		b.crash()
		time.Sleep(time.Until(b.Record().Expires) + 10*time.Millisecond)
		c, err := TryAcquire(ctx, store, opts("c"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release(ctx)
		if _, ok := c.Handed(); ok {
			t.Error("a lease taken after an expiry says a position was handed over")
		}
	})
}

func TestUntilExpiry(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		expires time.Time
		want    time.Duration
	}{
		{time.Time{}, time.Second},
		{now.Add(time.Hour), time.Second},
		{now.Add(300 * time.Millisecond), 301 * time.Millisecond},
		{now.Add(-time.Hour), time.Millisecond},
	} {
		if got := untilExpiry(Record{Expires: c.expires}, time.Second, now); got != c.want {
			t.Errorf("untilExpiry(%s from now) = %s, want %s", c.expires.Sub(now), got, c.want)
		}
	}
}

// putCounter counts the store's writes of the lease object.
type putCounter struct {
	replica.Store
	puts atomic.Int64
}

func (p *putCounter) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if key == Key {
		p.puts.Add(1)
	}
	return p.Store.PutIfMatch(ctx, key, r, size, etag)
}

// A holder that hands the lease to a waiting instance writes one record
// naming it; the waiter, told that record (or reading it), holds the lease
// without a write of its own, with the position handed over, renews it, and
// a third instance finds it held.
func TestHandToNamesTheNextHolderInOneWrite(t *testing.T) {
	stores(t, func(t *testing.T, base replica.Store) {
		for _, told := range []bool{true, false} {
			ctx := context.Background()
			store := &putCounter{Store: base}
			a, err := TryAcquire(ctx, store, opts("a"))
			if err != nil {
				t.Fatal(err)
			}
			ob := opts("b")
			next := Successor{Holder: ob.Holder, URL: ob.URL, Started: processStart}
			if !a.Accepts(next) {
				t.Fatal("a refuses a successor without a takeover request in the way")
			}
			before := store.puts.Load()
			if err := a.HandTo(ctx, next, Final{TXID: 9, Checksum: 77}); err != nil {
				t.Fatal(err)
			}
			if n := store.puts.Load() - before; n != 1 {
				t.Fatalf("the hand-over wrote the lease %d times, want 1", n)
			}
			rec, etag := a.ReleasedAs()
			var b *Lease
			if told {
				b, err = tryAcquireFrom(ctx, store, ob, rec, etag, true)
			} else {
				b, err = TryAcquire(ctx, store, ob)
			}
			if err != nil {
				t.Fatalf("told=%v: the named successor could not take the lease: %v", told, err)
			}
			if n := store.puts.Load() - before; n != 1 {
				t.Errorf("told=%v: the successor wrote the lease to take it (%d writes in all)", told, n)
			}
			if f, ok := b.Handed(); !ok || f != (Final{TXID: 9, Checksum: 77}) {
				t.Errorf("told=%v: Handed() = %+v, %v", told, f, ok)
			}
			if !b.Valid() || b.Record().Epoch != a.Record().Epoch || b.Record().Holder != "b" || b.Record().HandedBy != "" {
				t.Errorf("told=%v: successor holds %+v, valid %v; want the handed record's epoch %d as its own", told, b.Record(), b.Valid(), a.Record().Epoch)
			}
			if _, err := TryAcquire(ctx, store, opts("c")); !errors.Is(err, ErrHeld) {
				t.Errorf("told=%v: a third instance took a handed lease: %v", told, err)
			}
			if err := b.renew(time.Now().Add(testTTL)); err != nil {
				t.Errorf("told=%v: the successor's first renewal: %v", told, err)
			}
			if err := b.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A live takeover request of another instance reserves the lease: HandTo
// names nobody and releases it for the requester, as Release does.
func TestHandToHonoursATakeoverRequest(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		oa := opts("a")
		oa.Started = processStart.Add(-time.Hour)
		a, err := TryAcquire(ctx, store, oa)
		if err != nil {
			t.Fatal(err)
		}
		on := opts("n")
		on.Started = processStart
		if ok, err := RequestTakeover(ctx, store, on); err != nil || !ok {
			t.Fatalf("takeover request: %v, %v", ok, err)
		}
		if err := a.renew(time.Now().Add(testTTL)); err != nil { // the renewal adopts the request
			t.Fatal(err)
		}
		other := Successor{Holder: "b", URL: "http://b", Started: processStart}
		if a.Accepts(other) {
			t.Error("a accepts a successor other than the instance that asked for the lease")
		}
		if err := a.HandTo(ctx, other, Final{TXID: 3, Checksum: 4}); err != nil {
			t.Fatal(err)
		}
		rec, _, err := Read(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Released() || rec.Holder != "a" || rec.Takeover == nil || rec.Takeover.Holder != "n" {
			t.Fatalf("after HandTo against a takeover request the bucket holds %+v; want a's release reserved for n", rec)
		}
		if _, err := TryAcquire(ctx, store, opts("b")); !errors.Is(err, ErrHeld) {
			t.Errorf("b took a lease reserved for n: %v", err)
		}
	})
}
