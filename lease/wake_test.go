package lease

import (
	"context"
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
		b.WatchWaits(func(ctx context.Context, name string, holder func() Record, wake func()) {
			watched <- holder().Holder
			select {
			case <-a.Released():
				if rec, _, err := Read(ctx, store); err != nil || !rec.Released() {
					t.Errorf("Released closed while the bucket says %+v, %v", rec, err)
				}
				wake()
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
