package replica

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Two merges that each need most of the budget run one after the other, never
// each holding part of it (which would leave both waiting forever).
func TestBudgetTakesSlotsInOneStep(t *testing.T) {
	b := NewBudget(64)
	ctx := context.Background()
	if err := b.Acquire(ctx, 40); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(ctx, 40) }()
	select {
	case err := <-got:
		t.Fatalf("second Acquire(40) returned %v while only 24 slots were free", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := b.InUse(); n != 40 {
		t.Fatalf("in use = %d while the second waits; want 40 (no partial hold)", n)
	}
	b.Release(40)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := b.InUse(); n != 40 {
		t.Fatalf("in use = %d; want 40", n)
	}
	b.Release(40)
}

func TestBudgetWaitEndsWithContext(t *testing.T) {
	b := NewBudget(2)
	if err := b.Acquire(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire on a full budget = %v; want the context's error", err)
	}
	b.Release(2)
	if n := b.InUse(); n != 0 {
		t.Fatalf("in use = %d after a cancelled wait; want 0", n)
	}
	if err := b.Acquire(context.Background(), 3); err == nil {
		t.Fatal("Acquire of more slots than the budget holds succeeded")
	}
}
