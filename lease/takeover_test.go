package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// A deploy: the old instance holds the lease, the new one (started later)
// asks for it. The holder learns it at its next renewal, releases, the
// lease stays reserved for the requester (a third instance cannot take
// it), and the requester takes it. The old instance can never ask back.
func TestTakeoverGoesToTheNewerInstanceOnly(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		base := time.Now()
		oldOpts, newOpts, other := opts("old"), opts("new"), opts("other")
		oldOpts.Started, newOpts.Started, other.Started = base, base.Add(time.Second), base.Add(-time.Second)
		l, err := TryAcquire(ctx, store, oldOpts)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		// An older instance may not ask.
		if asked, err := RequestTakeover(ctx, store, other); err != nil || asked {
			t.Fatalf("older instance's request: asked=%v err=%v, want refused", asked, err)
		}
		asked, err := RequestTakeover(ctx, store, newOpts)
		if err != nil || !asked {
			t.Fatalf("newer instance's request: asked=%v err=%v", asked, err)
		}
		rec, _, _ := Read(ctx, store)
		if rec.Holder != "old" || rec.Takeover == nil || rec.Takeover.Holder != "new" {
			t.Fatalf("record after the request: %+v", rec)
		}
		askedAt := time.Now()
		select {
		case <-l.HandOver():
		case <-time.After(2 * testTTL):
			t.Fatal("the holder never learnt of the takeover request")
		}
		// At the next renewal (every TTL/3), with room for a loaded machine's
		// scheduling, and well before the lease could have lapsed.
		if d := time.Since(askedAt); d > testTTL*3/4 {
			t.Fatalf("hand-over signalled %s after the request; renewals come every %s", d, testTTL/3)
		}
		if !l.Valid() {
			t.Fatal("the lease must stay valid until released: the holder still ships what is queued")
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := TryAcquire(ctx, store, other); !errors.Is(err, ErrHeld) {
			t.Fatalf("a third instance took a lease reserved for the requester: %v", err)
		}
		nl, err := TryAcquire(ctx, store, newOpts)
		if err != nil {
			t.Fatalf("the requester could not take the released lease: %v", err)
		}
		defer nl.Release(ctx)
		if got := nl.Record(); got.Epoch != rec.Epoch+1 || got.Takeover != nil {
			t.Fatalf("new holder's record %+v, want epoch %d and no request", got, rec.Epoch+1)
		}
		// The old instance cannot ask the newer holder back.
		if asked, err := RequestTakeover(ctx, store, oldOpts); err != nil || asked {
			t.Fatalf("old instance asked the newer holder: asked=%v err=%v", asked, err)
		}
	})
}

// A request does not change the holder's expiry, and a holder that never
// renews (paused) keeps no claim past it: the requester waits for expiry.
func TestTakeoverRequestKeepsTheExpiry(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		oldOpts, newOpts := opts("old"), opts("new")
		oldOpts.Started, newOpts.Started = time.Now(), time.Now().Add(time.Second)
		l, err := TryAcquire(ctx, store, oldOpts)
		if err != nil {
			t.Fatal(err)
		}
		l.crash()
		before, _, _ := Read(ctx, store)
		if _, err := RequestTakeover(ctx, store, newOpts); err != nil {
			t.Fatal(err)
		}
		after, _, _ := Read(ctx, store)
		if !after.Expires.Equal(before.Expires) || after.Epoch != before.Epoch {
			t.Fatalf("the request changed the lease: %+v -> %+v", before, after)
		}
		if _, err := TryAcquire(ctx, store, newOpts); !errors.Is(err, ErrHeld) {
			t.Fatalf("taken before expiry: %v", err)
		}
		time.Sleep(time.Until(after.Expires) + 10*time.Millisecond)
		nl, err := TryAcquire(ctx, store, newOpts)
		if err != nil {
			t.Fatalf("not taken after expiry: %v", err)
		}
		nl.Release(ctx)
	})
}
