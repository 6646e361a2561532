package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Turn hands one database's write lock out in order, between its write
// groups and the interactive sessions that write. SQLite's own busy handler
// is no queue: a waiter polls with growing sleeps, so a stream of clients
// that each open a write transaction and walk away (the lock then held
// until their transaction times out) could keep everyone else's writes
// waiting for tens of seconds. With a turn, waiters are served in arrival
// order, except that a waiting write group goes before the sessions queued
// behind a session's turn (a group answers many clients and holds the lock
// for milliseconds); and a holder that sits idle while others wait is
// revoked once it has been idle for the configured time.
type Turn struct {
	idleLimit time.Duration

	mu        sync.Mutex
	held      bool
	holder    Holder // nil: a write group (never idle while it holds the turn)
	lastGroup bool   // the last holder was a write group
	queue     []*turnWaiter
}

// Holder is a session that may keep the turn between its requests.
type Holder interface {
	// IdleFor is how long the holder has run no statement (0 while it runs one).
	IdleFor() time.Duration
	// Revoke rolls the holder's transaction back and ends it, releasing the
	// turn; it reports false when the holder is running a statement.
	Revoke() bool
}

type turnWaiter struct {
	group bool
	ch    chan struct{} // closed when the turn is handed to the waiter
}

// NewTurn returns a turn whose idle holders are revoked after idleLimit
// while others wait (≤ 0: never).
func NewTurn(idleLimit time.Duration) *Turn { return &Turn{idleLimit: idleLimit} }

// Acquire waits for the turn; h is the session taking it (nil: a write
// group). It revokes an idle holder while it waits.
func (t *Turn) Acquire(ctx context.Context, h Holder) error {
	t.mu.Lock()
	if !t.held {
		t.take(h)
		t.mu.Unlock()
		return nil
	}
	w := &turnWaiter{group: h == nil, ch: make(chan struct{})}
	t.queue = append(t.queue, w)
	t.mu.Unlock()
	var tick <-chan time.Time
	if t.idleLimit > 0 {
		tk := time.NewTicker(min(max(t.idleLimit/4, time.Millisecond), 50*time.Millisecond))
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-w.ch:
			t.mu.Lock()
			t.holder = h
			t.mu.Unlock()
			return nil
		case <-ctx.Done():
			t.mu.Lock()
			for i, q := range t.queue {
				if q == w {
					t.queue = append(t.queue[:i], t.queue[i+1:]...)
					t.mu.Unlock()
					return ctx.Err()
				}
			}
			t.mu.Unlock()
			// Handed over as the context ended: pass it on.
			t.Release()
			return ctx.Err()
		case <-tick:
			t.mu.Lock()
			holder := t.holder
			t.mu.Unlock()
			if holder != nil && holder.IdleFor() >= t.idleLimit {
				holder.Revoke()
			}
		}
	}
}

func (t *Turn) take(h Holder) {
	t.held, t.holder, t.lastGroup = true, h, h == nil
}

// Release gives the turn to the next waiter: a waiting write group if a
// session held it, else the first in line.
func (t *Turn) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		t.held, t.holder = false, nil
		return
	}
	next := 0
	if !t.lastGroup {
		for i, w := range t.queue {
			if w.group {
				next = i
				break
			}
		}
	}
	w := t.queue[next]
	t.queue = append(t.queue[:next], t.queue[next+1:]...)
	t.holder, t.lastGroup = nil, w.group // the waiter names itself once it wakes
	close(w.ch)
}

// Waiting reports how many wait for the turn.
func (t *Turn) Waiting() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue)
}
