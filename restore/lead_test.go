package restore

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A file waiting for the lead to pass its page is released when the restore
// fails elsewhere (its context ends) and when the lead ends, whatever pages
// the lead held: a lead that failed part-way once left the other files
// waiting forever and the restore hung.
func TestWaitLeadEndsWithTheRestoreOrTheLead(t *testing.T) {
	newBuilder := func() *builder {
		b := &builder{}
		b.leadCond = sync.NewCond(&b.leadMu)
		b.advanceLead(10)
		return b
	}
	waitFor := func(t *testing.T, what string, done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still waiting for the lead after 5 s", what)
			return nil
		}
	}

	b := newBuilder()
	if err := b.waitLead(context.Background(), 10); err != nil {
		t.Fatalf("a page the lead has passed: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.waitLead(ctx, 500) }()
	time.Sleep(50 * time.Millisecond) // let it wait
	cancel()
	if err := waitFor(t, "restore cancelled", done); err == nil {
		t.Fatal("a cancelled wait reported success")
	}

	b = newBuilder()
	go func() { done <- b.waitLead(context.Background(), 500) }()
	time.Sleep(50 * time.Millisecond)
	b.advanceLead(^uint32(0)) // what fetch does when the lead's file ends
	if err := waitFor(t, "lead ended", done); err != nil {
		t.Fatalf("the lead ended: %v", err)
	}
}
