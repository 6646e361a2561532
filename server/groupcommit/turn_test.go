package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type fakeHolder struct {
	turn    *Turn
	idle    atomic.Bool
	revoked atomic.Int32
}

func (h *fakeHolder) IdleFor() time.Duration {
	if h.idle.Load() {
		return time.Hour
	}
	return 0
}

func (h *fakeHolder) Revoke() bool {
	if !h.idle.Load() {
		return false
	}
	if h.revoked.Add(1) == 1 {
		h.turn.Release()
	}
	return true
}

// A session that holds the write turn and walks away is revoked as soon as
// someone waits; a busy one is not; a waiting write group goes before the
// sessions queued earlier, and sessions keep their arrival order.
func TestTurnRevokesIdleHoldersAndServesGroupsFirst(t *testing.T) {
	turn := NewTurn(20 * time.Millisecond)
	busy := &fakeHolder{turn: turn}
	if err := turn.Acquire(context.Background(), busy); err != nil {
		t.Fatal(err)
	}
	var order []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	take := func(name string, h Holder) {
		defer wg.Done()
		if err := turn.Acquire(context.Background(), h); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
		turn.Release()
	}
	s1, s2 := &fakeHolder{turn: turn}, &fakeHolder{turn: turn}
	wg.Add(1)
	go take("session 1", s1)
	for turn.Waiting() < 1 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(1)
	go take("session 2", s2)
	for turn.Waiting() < 2 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(1)
	go take("group", nil)
	for turn.Waiting() < 3 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if busy.revoked.Load() != 0 || turn.Waiting() != 3 {
		t.Fatalf("a holder running a statement was revoked (%d) or a waiter got the turn", busy.revoked.Load())
	}
	start := time.Now()
	busy.idle.Store(true)
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the idle holder was revoked only after %s", d)
	}
	if busy.revoked.Load() != 1 {
		t.Fatalf("revoked %d times", busy.revoked.Load())
	}
	if want := []string{"group", "session 1", "session 2"}; len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("order %v, want %v", order, want)
	}
	// A waiter whose context ends leaves the queue; the turn stays usable.
	if err := turn.Acquire(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := turn.Acquire(ctx, s1); err == nil {
		t.Fatal("acquired a held turn")
	}
	turn.Release()
	if turn.Waiting() != 0 {
		t.Fatalf("%d still waiting", turn.Waiting())
	}
	if err := turn.Acquire(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	turn.Release()
}
