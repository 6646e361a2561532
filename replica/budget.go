package replica

import (
	"context"
	"fmt"
	"sync"
)

// Budget bounds how many store requests background work (compaction,
// retention) has in flight at once across a whole process, so that it can
// never take the connections the write path needs: shipping does not draw
// from it, and each backend's transport allows more connections per host
// than the budget holds (see MaxConnsPerHost in the backends).
//
// Acquire takes n slots in one step, so a merge that needs several inputs
// open together never holds part of its share while waiting for the rest
// (two merges each holding half the budget would wait forever). Waiters are
// served first come, first served.
type Budget struct {
	mu      sync.Mutex
	size    int
	avail   int
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int
	ready chan struct{}
}

// NewBudget returns a budget of size slots (at least 1).
func NewBudget(size int) *Budget {
	size = max(size, 1)
	return &Budget{size: size, avail: size}
}

// DefaultBackgroundRequests is the size of BackgroundBudget.
const DefaultBackgroundRequests = 64

// MaxConnsPerHost is the connection cap the HTTP backends (S3, Azure) set on
// their transports: it bounds the process's connections to a store, and it
// leaves MaxConnsPerHost - DefaultBackgroundRequests connections that only
// the write path and restores can use. (Left to itself, aws-sdk-go-v2 allows
// 2,048, and an unbounded merge once took them all while uploads waited.)
const MaxConnsPerHost = 512

// BackgroundBudget is the budget every compactor of the process shares
// unless it is given its own.
var BackgroundBudget = NewBudget(DefaultBackgroundRequests)

// Size is the most slots one Acquire may take.
func (b *Budget) Size() int { return b.size }

// Acquire waits for n slots (1 <= n <= Size) or for ctx to end.
func (b *Budget) Acquire(ctx context.Context, n int) error {
	if n < 1 || n > b.size {
		return fmt.Errorf("store request budget: cannot take %d of %d slots", n, b.size)
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.avail >= n {
		b.avail -= n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give the slots back
			b.mu.Unlock()
			b.Release(n)
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grant()
			b.mu.Unlock()
		}
		return ctx.Err()
	}
}

// Release returns n slots.
func (b *Budget) Release(n int) {
	b.mu.Lock()
	b.avail += n
	if b.avail > b.size {
		b.mu.Unlock()
		panic("replica: Budget released more slots than it holds")
	}
	b.grant()
	b.mu.Unlock()
}

// InUse reports the slots currently taken.
func (b *Budget) InUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.avail
}

// grant wakes waiters in order while the head of the queue fits. Callers
// hold mu.
func (b *Budget) grant() {
	for len(b.waiters) > 0 && b.waiters[0].n <= b.avail {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.avail -= w.n
		close(w.ready)
	}
}
