package dbhost

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// database is one hosted database: a writer goroutine that runs write groups,
// a shipper goroutine that makes them durable, a pool of read connections,
// and interactive sessions on connections of their own.
type database struct {
	name  string
	path  string
	opts  *Options
	log   *slog.Logger
	store replica.Store
	rep   *replicated.DB

	writer  *sqlconn.Handle
	readers chan *sqlconn.Handle

	gate    sync.RWMutex // Write holds it shared while enqueueing; close takes it to stop intake
	closed  bool
	writeCh chan *writeReq
	shipCh  chan *group
	pace    uploadPace    // lets the writer group requests while an upload runs
	done    chan struct{} // closed when the writer and shipper have stopped

	fenced   atomic.Bool
	sessMu   sync.Mutex
	sessions map[*session]struct{}

	lossMu          sync.Mutex
	unshipped       int       // commits not yet accepted by the store
	oldestUnshipped time.Time // when the oldest of them committed

	deleting atomic.Bool // Delete is closing it: its replica may be purged next

	idemPruned time.Time // last prune of expired idempotency keys (writer goroutine only)
	// What the database needs of its host, given at open so that nothing
	// here reaches back into the registry.
	uploads  *uploadSlots                                             // the host's upload bound; nil: unbounded
	reopenAs func(ctx context.Context, name string) (Database, error) // the host's Get, for a request that raced eviction
	lastUsed atomic.Int64                                             // unix nanoseconds of the last use (evict.go)
	inflight atomic.Int32                                             // Read and Write calls running: they pin it open
	evicted  bool                                                     // closed for being idle (under gate): callers reopen
}

// writeReq is one Write call waiting for its group.
type writeReq struct {
	ctx      context.Context
	fn       func(sqlconn.Conn) error
	idem     *idemCall // nil without an Idempotency-Key
	err      error
	bookmark Bookmark
	done     chan struct{}
}

// group is one committed transaction: the requests it answers and when it committed.
type group struct {
	reqs      []*writeReq
	committed time.Time
}

func (db *database) Name() string { return db.name }

func (db *database) bookmark() Bookmark { return Bookmark(db.rep.Pos().TXID) }

func (db *database) unavailable(msg string) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeUnavailable, db.name, "database "+quote(db.name)+": "+msg)
}

func (db *database) fencedError() *dberr.Error {
	return db.unavailable("stopped taking writes: another writer owns its replica (fenced); nothing more is acknowledged. Restart the server that should own it")
}

// Read runs fn on a pooled read-only connection.
func (db *database) Read(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	db.gate.RLock() // close waits for reads in flight
	if db.closed {
		evicted := db.evicted
		db.gate.RUnlock()
		if evicted {
			return db.reopenThen(ctx, func(d Database) (Bookmark, error) { return d.Read(ctx, fn) })
		}
		return 0, db.unavailable("closing; retry")
	}
	defer db.gate.RUnlock()
	db.inflight.Add(1)
	defer db.inflight.Add(-1)
	db.touch()
	var c *sqlconn.Handle
	select {
	case c = <-db.readers:
	case <-ctx.Done():
		return 0, sqlconn.Translate(ctx.Err())
	}
	defer func() { db.readers <- c }()
	err := runFn(c, fn)
	if !c.Autocommit() { // fn left a transaction open: end it so the pool stays clean
		_ = c.Run("ROLLBACK")
	}
	return db.bookmark(), err
}

// Write queues fn for the next write group and waits until the group is
// durable (sync) or committed (async).
func (db *database) Write(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	if db.fenced.Load() {
		return 0, db.fencedError()
	}
	req := &writeReq{ctx: ctx, fn: fn, idem: db.idemCall(ctx), done: make(chan struct{})}
	db.gate.RLock()
	if db.closed {
		evicted := db.evicted
		db.gate.RUnlock()
		if evicted {
			return db.reopenThen(ctx, func(d Database) (Bookmark, error) { return d.Write(ctx, fn) })
		}
		return 0, db.unavailable("closing; retry")
	}
	// Pinned until answered: eviction skips it (and would drain the queue anyway).
	db.inflight.Add(1)
	defer db.inflight.Add(-1)
	db.touch()
	select {
	case db.writeCh <- req:
		db.gate.RUnlock()
	case <-ctx.Done():
		db.gate.RUnlock()
		return 0, sqlconn.Translate(ctx.Err())
	}
	select {
	case <-req.done:
		return req.bookmark, req.err
	case <-ctx.Done():
		// The request may still commit; the caller has gone, so nobody learns it.
		return 0, sqlconn.Translate(ctx.Err())
	}
}

// reopenThen runs call on the database that replaces this evicted one.
func (db *database) reopenThen(ctx context.Context, call func(Database) (Bookmark, error)) (Bookmark, error) {
	d, err := db.reopen(ctx)
	if err != nil {
		return 0, err
	}
	return call(d)
}

// runFn calls fn, turning a panic into an error so one request cannot take
// the writer goroutine down.
func runFn(c *sqlconn.Handle, fn func(sqlconn.Conn) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = dberr.New(dberr.CodeInternal, fmt.Sprintf("panic while running request: %v", p))
		}
	}()
	return fn(c)
}

func (db *database) noteCommitted(t time.Time) {
	db.lossMu.Lock()
	if db.unshipped == 0 {
		db.oldestUnshipped = t
	}
	db.unshipped++
	db.lossMu.Unlock()
}

func (db *database) noteShipped(n int) {
	db.lossMu.Lock()
	db.unshipped -= n
	if db.unshipped <= 0 {
		db.unshipped = 0
		db.oldestUnshipped = time.Time{}
	}
	db.lossMu.Unlock()
}

// Stats describes one open database for listings and metrics.
type Stats struct {
	Name            string
	TXID            uint64
	Unshipped       int       // commits not yet in the bucket (the async loss window)
	OldestUnshipped time.Time // commit time of the oldest of them; zero if none
	Fenced          bool
}

func (db *database) stats() Stats {
	db.lossMu.Lock()
	defer db.lossMu.Unlock()
	return Stats{Name: db.name, TXID: uint64(db.rep.Pos().TXID), Unshipped: db.unshipped,
		OldestUnshipped: db.oldestUnshipped, Fenced: db.fenced.Load()}
}

// close stops intake, lets the writer finish what is queued, ships it, and
// closes every connection and its replication.
func (db *database) close(ctx context.Context) error {
	db.gate.Lock()
	already := db.closed
	db.closed = true
	if !already {
		close(db.writeCh)
	}
	db.gate.Unlock()
	if already {
		<-db.done
		return nil
	}
	return db.finishClose(ctx)
}

// finishClose waits for the writer and shipper to drain what was queued,
// then closes sessions, the replication (its final Sync) and connections.
func (db *database) finishClose(ctx context.Context) error {
	<-db.done
	db.sessMu.Lock()
	open := make([]*session, 0, len(db.sessions))
	for s := range db.sessions {
		open = append(open, s)
	}
	db.sessMu.Unlock()
	for _, s := range open {
		s.Close(ctx)
	}
	// The final upload, then compaction stopped and the lease released.
	// Merging level 0 afterwards is for a replica this process keeps: not
	// one about to be purged (nor one whose lease passes on: replicated.DB).
	err := db.rep.Close(ctx, db.deleting.Load())
	db.writer.Close()
	close(db.readers)
	for c := range db.readers {
		c.Close()
	}
	if err != nil && !db.opts.Replication.fenced(err) {
		return fmt.Errorf("close database %q: final upload to %s failed: %w", db.name, db.store, err)
	}
	return nil
}
