package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
)

// A second table waits on the first's lease, takes it once released, calls
// its callback once, and Close releases what it holds.
func TestTableWaitsTakesOverAndCloses(t *testing.T) {
	ctx := context.Background()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := NewTable(opts("a"), nil, func(context.Context, string) error { return nil })
	defer a.Close()
	if _, err := a.TryAcquire(ctx, "db", store); err != nil {
		t.Fatal(err)
	}
	if a.Lease("db") == nil {
		t.Fatal("a holds no lease after TryAcquire")
	}

	var opened atomic.Int32
	taken := make(chan struct{}, 2)
	b := NewTable(opts("b"), nil, func(_ context.Context, name string) error {
		if name != "db" {
			t.Errorf("callback for %q, want db", name)
		}
		opened.Add(1)
		taken <- struct{}{}
		return nil
	})
	defer b.Close()
	_, err = b.TryAcquire(ctx, "db", store)
	var held *HeldError
	if !errors.As(err, &held) || held.Record.Holder != "a" {
		t.Fatalf("b.TryAcquire = %v, want *HeldError naming a", err)
	}
	if rec, ok := b.Holder("db"); !ok || rec.Holder != "a" {
		t.Fatalf("b.Holder = %+v, %v; want a while waiting", rec, ok)
	}
	if _, err := b.TryAcquire(ctx, "db", store); !errors.As(err, &held) {
		t.Fatalf("b.TryAcquire while waiting = %v, want *HeldError", err)
	}

	a.Release("db")
	select {
	case <-taken:
	case <-time.After(3 * time.Second):
		t.Fatal("b did not take the lease within 3s of its release")
	}
	l := b.Lease("db")
	if l == nil || !l.Valid() || l.Record().Holder != "b" || l.Record().Epoch != 2 {
		t.Fatalf("b's lease after takeover = %v", l)
	}
	if _, ok := b.Holder("db"); ok {
		t.Fatal("b still reports a holder it waits on after taking the lease")
	}
	if release, err := b.TryAcquire(ctx, "db", store); err != nil || release == nil {
		t.Fatalf("b.TryAcquire on its own lease = %v", err)
	}

	b.Close()
	select {
	case <-l.Lost():
	default:
		t.Fatal("Close did not release b's lease")
	}
	if rec, _, err := Read(ctx, store); err != nil || !rec.Released() {
		t.Fatalf("lease after Close = %+v, %v; want released", rec, err)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("callback called %d times, want 1", n)
	}
}
