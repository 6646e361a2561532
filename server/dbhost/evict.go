package dbhost

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Many databases on one server: an open database holds about twenty
// descriptors (its read pool, the writer, the engine's connections and
// files) and its goroutines, so only a bounded number stay open. The least
// recently used idle one is closed when a new one opens past the cap, and a
// sweeper closes those idle longer than IdleTimeout. A closed database keeps
// nothing in memory but its name's lock: its local file and the engine's
// record of the replicated position stay on disk, so reopening it needs no
// restore. Closing ships whatever is committed first (engine Close), and a
// database with requests in flight, open sessions, or commits not yet in the
// bucket is never chosen.

const (
	// freeAfterClosing: a sweep that closes at least this many databases
	// returns the freed memory to the OS at once.
	freeAfterClosing = 8
	// maxOpenDefault caps the default even where descriptors are plentiful:
	// an open database's connections hold about 1 MB of page caches, so
	// beyond a few hundred memory, not descriptors, is what runs out.
	maxOpenDefault = 256
	// reservedDescriptors are kept for listeners, client sockets, the store's
	// connections and interactive sessions.
	reservedDescriptors = 256
)

// descriptorsPerDatabase estimates one open database's descriptors: each
// SQLite connection holds the database and its WAL, plus the shared memory
// file, plus the capture engine's connections and files.
func descriptorsPerDatabase(readConns int) int { return 2*(readConns+1) + 12 }

// defaultMaxOpen derives the cap from the descriptor limit so that open
// databases alone can never exhaust it.
func defaultMaxOpen(readConns int, nofile uint64) int {
	n := maxOpenDefault
	if nofile > 0 {
		fit := (int64(nofile) - reservedDescriptors) / int64(descriptorsPerDatabase(readConns))
		if fit < int64(n) {
			n = int(max(fit, 1))
		}
	}
	return n
}

// touch records a use, for the LRU order and the idle timeout.
func (db *database) touch() { db.lastUsed.Store(time.Now().UnixNano()) }

// busy reports whether db must stay open: requests in flight or queued, an
// upload running, sessions open, or commits not yet in the bucket.
func (db *database) busy() bool {
	if db.inflight.Load() > 0 || db.commits.Busy() {
		return true
	}
	db.sessMu.Lock()
	sessions := len(db.sessions)
	db.sessMu.Unlock()
	unshipped, _ := db.commits.Unshipped()
	return sessions > 0 || unshipped > 0 || db.commits.Fenced()
}

// reserveSlot waits until a database may open without exceeding MaxOpen
// (closing idle ones to make room) and reserves the slot; release it once
// the database is in the table or failed to open. Busy databases become
// idle within an upload, so it waits for one rather than exceed the cap
// (the descriptor limit is hard); after openWait it answers UNAVAILABLE.
func (h *Host) reserveSlot(ctx context.Context, name string) (release func(), err error) {
	deadline := time.Now().Add(openWait)
	for {
		h.makeRoom(name)
		h.mu.Lock()
		if len(h.dbs)+h.opening < h.opts.MaxOpen {
			h.opening++
			h.mu.Unlock()
			return func() { h.mu.Lock(); h.opening--; h.mu.Unlock() }, nil
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, fmt.Sprintf(
				"database %s: all %d open databases are busy; retry, or raise max-open-databases (and the descriptor limit)", quote(name), h.opts.MaxOpen))
		}
		select {
		case <-ctx.Done():
			return nil, sqlconn.Translate(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// openWait bounds how long opening a database waits for an open one to
// become idle.
const openWait = 10 * time.Second

// makeRoom closes least recently used idle databases until a slot is free
// for one more. except is the name the caller holds the lock of.
func (h *Host) makeRoom(except string) {
	h.mu.Lock()
	excess := len(h.dbs) + h.opening - h.opts.MaxOpen + 1
	var cands []*database
	if excess > 0 {
		for name, db := range h.dbs {
			if name != except {
				cands = append(cands, db)
			}
		}
	}
	h.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool { return cands[i].lastUsed.Load() < cands[j].lastUsed.Load() })
	for _, db := range cands {
		if excess <= 0 {
			return
		}
		if !db.busy() && h.evict(db, 0) {
			excess--
		}
	}
	// Still full: databases kept open only by sessions that hold no
	// transaction and have run nothing for a while (a stream that changed
	// its connection's settings keeps its session between requests) give
	// their slot up; those sessions' next statement is told why.
	for _, db := range cands {
		if excess <= 0 {
			return
		}
		if db.closePinningSessions(h.opts.PinnedSessionIdle) && h.evict(db, 0) {
			excess--
		}
	}
}

// closePinningSessions closes db's sessions if each holds no transaction
// and has run nothing for minIdle, and nothing else keeps db busy; it
// reports whether it did.
func (db *database) closePinningSessions(minIdle time.Duration) bool {
	if db.inflight.Load() > 0 || db.commits.Busy() || db.commits.Fenced() {
		return false
	}
	if n, _ := db.commits.Unshipped(); n > 0 {
		return false
	}
	db.sessMu.Lock()
	open := make([]*session, 0, len(db.sessions))
	for s := range db.sessions {
		open = append(open, s)
	}
	db.sessMu.Unlock()
	if len(open) == 0 {
		return false
	}
	for _, s := range open {
		if s.IdleFor() < minIdle || !s.mu.TryLock() {
			return false
		}
		idle := s.closed || (s.c != nil && s.c.Autocommit())
		s.mu.Unlock()
		if !idle {
			return false
		}
	}
	for _, s := range open {
		s.mu.Lock()
		if !s.closed {
			s.ended = dberr.ForDatabase(dberr.CodeUnavailable, db.name, fmt.Sprintf(
				"database %s: this stream's connection was closed to free the database's slot for others: every open database was in use (max-open-databases %d) and it had run nothing for %s (limits.pinned-session-idle); start a new stream",
				quote(db.name), db.opts.MaxOpen, minIdle))
			s.abandon()
		}
		s.mu.Unlock()
	}
	return true
}

// sweepIdle closes databases unused for longer than IdleTimeout; one
// goroutine for the whole host, so an idle database costs no timer.
func (h *Host) sweepIdle(stop <-chan struct{}) {
	every := min(max(h.opts.IdleTimeout/4, 100*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		closed := h.closeIdle(time.Now().Add(-h.opts.IdleTimeout).UnixNano())
		if closed >= freeAfterClosing {
			// SQLite's caches of the closed databases are garbage now; hand
			// the pages back so an idle server's RSS reflects what it holds.
			debug.FreeOSMemory()
		}
	}
}

// closeIdle closes the databases unused since cutoff (unix nanoseconds)
// and reports how many it closed.
func (h *Host) closeIdle(cutoff int64) int {
	h.mu.Lock()
	var idle []*database
	for _, db := range h.dbs {
		if db.lastUsed.Load() < cutoff {
			idle = append(idle, db)
		}
	}
	h.mu.Unlock()
	closed := 0
	for _, db := range idle {
		if h.evict(db, cutoff) {
			closed++
		}
	}
	return closed
}

// evict closes db if it is idle (and, with cutoff > 0, unused since
// cutoff). It never waits for the database's name lock: whoever holds it is
// opening, deleting or evicting it.
func (h *Host) evict(db *database, cutoff int64) bool {
	unlock, ok := h.tryLock(db.name)
	if !ok {
		return false
	}
	defer unlock()
	h.mu.Lock()
	current := h.dbs[db.name] == db && !h.closed
	h.mu.Unlock()
	if !current || (cutoff > 0 && db.lastUsed.Load() >= cutoff) {
		return false
	}
	// Stop intake atomically with the idleness check: Read, Write and Session
	// hold the gate shared while they register.
	db.gate.Lock()
	if db.closed || db.busy() {
		db.gate.Unlock()
		return false
	}
	h.mu.Lock()
	if h.closed { // Close owns it now
		h.mu.Unlock()
		db.gate.Unlock()
		return false
	}
	// Out of the table before anyone can see it closed: a request that
	// finds it evicted reopens by name and must not find it again.
	delete(h.dbs, db.name)
	h.evicting.Add(1)
	h.mu.Unlock()
	defer h.evicting.Done()
	h.evictions.Add(1)
	db.closed, db.evicted = true, true
	db.gate.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.UploadTimeout)
	defer cancel()
	if err := db.finishClose(ctx); err != nil {
		// Nothing was pending (busy said so), so this is the engine's last
		// check failing; the local file keeps every commit and the next
		// open ships anything the bucket lacks.
		h.opts.Logger.Warn("closing idle database", "db", db.name, "err", err)
	}
	if h.leases != nil {
		h.leases.Release(db.name)
	}
	h.opts.Logger.Debug("closed idle database", "db", db.name)
	return true
}

// reopen returns the database that replaces an evicted one, for a request
// that raced the eviction: it is served, not failed.
func (db *database) reopen(ctx context.Context) (Database, error) {
	return db.reopenAs(ctx, db.name)
}
