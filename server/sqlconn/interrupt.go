package sqlconn

import (
	"context"
	"sync"
	"time"

	"zombiezen.com/go/sqlite"
)

// interrupter enforces statement time limits and caller cancellation on one
// connection without a context, a goroutine and a walk of the statement
// cache per statement (what zombiezen's SetInterrupt costs on every call,
// more than a small insert). The connection keeps one channel installed with
// SetInterrupt for its whole life; a reused timer, or the caller's context,
// closes it. Only after it fired is a fresh channel installed.
type interrupter struct {
	c     *sqlite.Conn
	timer *time.Timer // fires at the armed deadline; reused

	mu       sync.Mutex
	ch       chan struct{} // installed on c; closed to interrupt
	armed    bool
	deadline time.Time
	fired    interruptCause
	stopCtx  func() bool // stops watching the armed statement's context
	onCancel func()      // fire(interruptedByCaller), allocated once
}

type interruptCause int

const (
	notInterrupted interruptCause = iota
	interruptedByDeadline
	interruptedByCaller
)

func newInterrupter(c *sqlite.Conn) *interrupter {
	it := &interrupter{c: c, ch: make(chan struct{})}
	c.SetInterrupt(it.ch)
	it.timer = time.AfterFunc(time.Hour, func() { it.fire(interruptedByDeadline) })
	it.timer.Stop()
	it.onCancel = func() { it.fire(interruptedByCaller) }
	return it
}

// fire closes the channel if a statement is armed. A deadline fire is
// ignored unless the deadline has passed: an AfterFunc timer that was
// already running when disarm stopped it may land during a later statement.
func (it *interrupter) fire(cause interruptCause) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.armed || it.fired != notInterrupted {
		return
	}
	if cause == interruptedByDeadline && time.Now().Before(it.deadline) {
		return
	}
	it.fired = cause
	close(it.ch)
}

// arm starts watching ctx and the time limit d until disarm. Calls come
// from the goroutine using the connection, one statement at a time.
func (it *interrupter) arm(ctx context.Context, d time.Duration) {
	it.mu.Lock()
	it.armed, it.deadline = true, time.Now().Add(d)
	it.mu.Unlock()
	it.timer.Reset(d)
	it.stopCtx = nil
	if ctx.Done() != nil {
		it.stopCtx = context.AfterFunc(ctx, it.onCancel)
	}
}

// disarm stops watching and reports what interrupted the statement, if anything.
func (it *interrupter) disarm() interruptCause {
	it.timer.Stop()
	if it.stopCtx != nil {
		it.stopCtx()
		it.stopCtx = nil
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	cause := it.fired
	it.armed, it.fired = false, notInterrupted
	if cause != notInterrupted {
		// SetInterrupt waits until zombiezen's watcher has delivered the
		// interrupt, so it cannot hit the next statement.
		it.ch = make(chan struct{})
		it.c.SetInterrupt(it.ch)
	}
	return cause
}

// stop releases the timer (the connection is closing).
func (it *interrupter) stop() {
	it.timer.Stop()
	it.c.SetInterrupt(nil)
}
