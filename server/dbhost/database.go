package dbhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// database is one hosted database: its write path (groupcommit), a pool of
// read connections, and interactive sessions on connections of their own.
type database struct {
	name  string
	path  string
	opts  *Options
	log   *slog.Logger
	store replica.Store
	rep   *replicated.DB

	writer  *sqlconn.Handle
	readers chan *sqlconn.Handle

	commits *groupcommit.Committer // the write path: group commit, upload, acknowledgement

	gate   sync.RWMutex // Read, Write and Session hold it shared while they start; close takes it to stop intake
	closed bool

	sessMu   sync.Mutex
	sessions map[*session]struct{}
	turn     *groupcommit.Turn // the write order of groups and writing sessions (turn.go)

	deleting  atomic.Bool // Delete is closing it: its replica may be purged next
	keepLease atomic.Bool // closed to be reopened at once under the same lease
	retiring  atomic.Bool // closed as it stops being the writer: no compaction on the way out

	// What the database needs of its host, given at open so that nothing
	// here reaches back into the registry.
	reopenAs func(ctx context.Context, name string) (Database, error) // the host's Get, for a request that raced eviction
	lastUsed atomic.Int64                                             // unix nanoseconds of the last use (evict.go)
	inflight atomic.Int32                                             // Read and Write calls running: they pin it open
	evicted  bool                                                     // closed for being idle (under gate): callers reopen
}

func (db *database) Name() string { return db.name }

func (db *database) bookmark() Bookmark { return Bookmark(db.rep.Pos().TXID) }

func (db *database) unavailable(msg string) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeUnavailable, db.name, "database "+quote(db.name)+": "+msg)
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
	if db.commits.Fenced() || !db.rep.Writable() {
		// The local copy may hold commits the bucket never got: never read it.
		return 0, db.unavailable("this instance is no longer its writer; retry")
	}
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
	err := c.Call(fn)
	if !c.Autocommit() { // fn left a transaction open: end it so the pool stays clean
		_ = c.Run("ROLLBACK")
	}
	return db.bookmark(), err
}

// Write hands fn to the database's write path (groupcommit.Committer.Submit)
// and waits until its group is durable (sync) or committed (async).
func (db *database) Write(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	if db.commits.Fenced() {
		return 0, groupcommit.FencedError(db.name)
	}
	if !db.rep.Writable() {
		// The lease missed its deadline: commit nothing that may never ship.
		return 0, db.unavailable("this instance's lease is not renewed (the store does not answer, or another instance takes over); the write was not applied; retry")
	}
	db.gate.RLock()
	if db.closed {
		db.gate.RUnlock()
		return db.writeAfterClose(ctx, fn)
	}
	// Pinned until answered: eviction skips it (and would drain the queue anyway).
	db.inflight.Add(1)
	defer db.inflight.Add(-1)
	db.touch()
	db.gate.RUnlock()
	txid, err := db.commits.Submit(ctx, fn)
	if errors.Is(err, groupcommit.ErrClosed) { // closed since the check above
		return db.writeAfterClose(ctx, fn)
	}
	return Bookmark(txid), err
}

// writeAfterClose answers a Write that found db closed: an evicted
// database is reopened to run it, one closing for good asks for a retry.
func (db *database) writeAfterClose(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	db.gate.RLock()
	evicted := db.evicted
	db.gate.RUnlock()
	if evicted {
		return db.reopenThen(ctx, func(d Database) (Bookmark, error) { return d.Write(ctx, fn) })
	}
	return 0, db.unavailable("closing; retry")
}

// reopenThen runs call on the database that replaces this evicted one.
func (db *database) reopenThen(ctx context.Context, call func(Database) (Bookmark, error)) (Bookmark, error) {
	d, err := db.reopen(ctx)
	if err != nil {
		return 0, err
	}
	return call(d)
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
	unshipped, oldest := db.commits.Unshipped()
	return Stats{Name: db.name, TXID: uint64(db.rep.Pos().TXID), Unshipped: unshipped,
		OldestUnshipped: oldest, Fenced: db.commits.Fenced()}
}

// close stops intake, lets the writer finish what is queued, ships it, and
// closes every connection and its replication.
func (db *database) close(ctx context.Context) error {
	db.gate.Lock()
	already := db.closed
	db.closed = true
	db.gate.Unlock()
	if already {
		db.commits.Close() // waits for the first close's drain
		return nil
	}
	return db.finishClose(ctx)
}

// retire closes db for good as a writer: requests that find it closed ask
// the host again (as after an eviction), which sends them to the writer.
func (db *database) retire(ctx context.Context) error {
	db.gate.Lock()
	already := db.closed
	db.closed, db.evicted = true, true
	db.gate.Unlock()
	if already {
		db.commits.Close()
		return nil
	}
	return db.finishClose(ctx)
}

// finishClose lets the write path drain what was queued (run, shipped,
// answered), then closes sessions, the replication (its final Sync) and
// connections.
func (db *database) finishClose(ctx context.Context) error {
	db.commits.Close()
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
	var err error
	if db.keepLease.Load() {
		err = db.rep.CloseKeepLease(ctx)
	} else {
		err = db.rep.Close(ctx, db.deleting.Load() || db.retiring.Load())
	}
	db.writer.Close()
	close(db.readers)
	for c := range db.readers {
		c.Close()
	}
	if err != nil && !db.opts.Replication.fenced(err) {
		return fmt.Errorf("close database %q: final upload to %s failed (its commits stay in %s and are uploaded when it is next opened with the replica reachable): %w",
			db.name, db.store, db.path, err)
	}
	return nil
}
