package dbhost

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// coldDB is a database that exists only in the bucket, opened before it is
// restored (cold open): reads run at once on a coldopen.View of the
// replica's newest state, fetching only the pages they touch, while the
// usual restore (hydration) writes the local file in the background
// (through a temp file renamed into place, so a crash leaves no file that
// looks complete). Writes and sessions wait for hydration, then run on the
// database opened from that file, as does every request after the hand-over.
//
// The lease (when leases are on) is taken beside the first reads, not
// before them: a read of a state the bucket holds needs no lease (it is
// what a follower answers), so the first answer does not wait for it.
// Hydration starts only once the lease is held and the view was checked
// against what a previous holder shipped meanwhile (a newer state replaces
// the view), so the restored file, and every write on it, is the writer's
// state. A read whose bookmark is newer than the view waits for that check
// (or for the restored file); another holder ends the cold open and the
// requests go to it as for any database whose lease is held elsewhere.
type coldDB struct {
	h      *Host
	name   string
	log    *slog.Logger
	opened time.Time
	cancel context.CancelFunc

	mu    sync.RWMutex // reads on the view hold it shared; a view swap and the hand-over take it
	view  *coldopen.View
	pages *restore.Pages
	stale bool // the view is older than the bucket and no newer one could be read: reads wait for the file
	over  bool // the view is closed: requests go to the host
	txid  atomic.Uint64

	leased   chan struct{} // closed once the lease is held (or the cold open ended) and the view checked
	leaseErr error         // why the lease was not taken; set before leased closes
	early    *earlyLease   // the lease, asked for beside the plan (nil: leases are off)

	done chan struct{} // closed once hydration ended, handed over or failed
	err  error         // why it failed; set before done closes

	firstOnce sync.Once
	kick      chan struct{} // closed to start hydrating: see hydrateDelay
	kickOnce  sync.Once
}

// MaxColdOpens bounds the databases answering on demand at once (each has
// its page cache, connections and a restore running): past it, a database
// only in the bucket is restored whole before its first answer.
const MaxColdOpens = 4

// hydrateDelay: the restore starts once the first read was answered, a
// write or session asks for it, or after this long, whichever comes first,
// so that it does not take the CPU and bandwidth the first answer needs.
const hydrateDelay = 250 * time.Millisecond

func (c *coldDB) startHydrating() { c.kickOnce.Do(func() { close(c.kick) }) }

func (c *coldDB) Name() string { return c.name }

// Bookmark is the TXID of the state the view shows.
func (c *coldDB) Bookmark() Bookmark { return Bookmark(c.txid.Load()) }

func (c *coldDB) Read(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	want := ReadAfter(ctx)
	if want > c.Bookmark() {
		// Read-your-writes: the view may predate what the previous holder
		// shipped; the lease check brings it up to date, or the file will.
		select {
		case <-c.leased:
		case <-ctx.Done():
			return 0, sqlconn.Translate(ctx.Err())
		}
	}
	c.mu.RLock()
	if !c.over && !c.stale && want <= c.Bookmark() {
		defer c.mu.RUnlock()
		err := c.view.Read(ctx, fn)
		c.firstOnce.Do(func() {
			c.startHydrating()
			st := c.view.Stats()
			c.log.Info("cold open: first read answered before the restore finished", "took", time.Since(c.opened),
				"requests", st.Requests, "bytes", st.Bytes, "pages_fetched", st.Fetched)
		})
		return c.Bookmark(), err
	}
	c.mu.RUnlock()
	db, err := c.hydrated(ctx)
	if err != nil {
		return 0, err
	}
	return db.Read(ctx, fn)
}

// Write waits for hydration: a write runs on the restored file, as always.
func (c *coldDB) Write(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	db, err := c.hydrated(ctx)
	if err != nil {
		return 0, err
	}
	return db.Write(ctx, fn)
}

// Session waits for hydration: a session runs on a connection of the
// restored file.
func (c *coldDB) Session(ctx context.Context) (Session, error) {
	db, err := c.hydrated(ctx)
	if err != nil {
		return nil, err
	}
	return db.Session(ctx)
}

// hydrated waits for the hand-over and returns the database opened from
// the restored file.
func (c *coldDB) hydrated(ctx context.Context) (Database, error) {
	c.startHydrating()
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, sqlconn.Translate(ctx.Err())
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.h.Get(ctx, c.name)
}

// coldFor returns name's database while it is cold-opened.
func (h *Host) coldFor(name string) *coldDB {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cold[name]
}

// openCold opens name on demand if it has no local file and its replica
// holds a state (the caller holds its lock); nil, nil: not cold (a local
// file, an empty replica, cold open off, or the state could not be read
// page by page: the caller restores it whole, which reports any damage).
func (h *Host) openCold(ctx context.Context, name string) (*coldDB, error) {
	if h.opts.ColdOpen == nil {
		return nil, nil
	}
	h.mu.Lock()
	refused := h.noCold[name]
	busy := len(h.cold) >= MaxColdOpens
	h.mu.Unlock()
	if refused || busy { // its last restore failed (restored whole, it reports why), or enough hydrate already
		return nil, nil
	}
	if _, elsewhere := h.Leader(name); elsewhere {
		return nil, nil // its writer is another instance: open says so, and the request goes there
	}
	if h.leaseTaken(name) {
		return nil, nil // taken meanwhile (a hand-over to this instance): opened whole (taken.go)
	}
	path := h.path(name)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	store := replica.Sub(h.opts.Store, name)
	log := h.opts.Logger.With("db", name)
	start := time.Now()
	// The lease is asked for beside the plan, not before it (see coldDB);
	// hydrate waits for it.
	hctx, cancel := context.WithCancel(context.Background())
	early := h.askLease(hctx, name, store)
	pages, err := restore.OpenPages(ctx, store, restore.Options{}, h.opts.ColdOpen.Head())
	if err == nil && pages.Size() == 0 {
		err = restore.ErrNoReplica
	}
	var view *coldopen.View
	if err == nil {
		view, err = coldopen.Open(pages, *h.opts.ColdOpen)
	}
	if err != nil {
		h.handLease(name, early, cancel) // to the usual open, which the caller runs next under the same lock
		if !errors.Is(err, restore.ErrNoReplica) && ctx.Err() == nil {
			log.Warn("cold open: cannot read the replica page by page; restoring it whole before answering", "err", err)
		}
		return nil, nil
	}
	c := &coldDB{h: h, name: name, view: view, pages: pages, log: log, opened: start, early: early,
		cancel: cancel, leased: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{})}
	c.txid.Store(uint64(pages.TXID()))
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		early.abandon()
		cancel()
		view.Close()
		return nil, dberr.New(dberr.CodeUnavailable, "server is shutting down")
	}
	if h.cold == nil {
		h.cold = map[string]*coldDB{}
	}
	h.cold[name] = c
	h.mu.Unlock()
	st := view.Stats()
	log.Info("cold open: answering reads on demand while the database is restored", "txid", uint64(pages.TXID()),
		"bytes", pages.Size(), "files", pages.Files(), "requests", st.Requests, "fetched_bytes", st.Bytes, "took", time.Since(start))
	go c.hydrate(hctx, store, path)
	return c, nil
}

// takeLease takes the database's lease (when leases are on) and brings the
// view up to what a previous holder shipped after the plan's listing;
// release undoes it. It closes c.leased whatever happens.
func (c *coldDB) takeLease(ctx context.Context, store replica.Store) (release func(), err error) {
	defer func() {
		c.leaseErr = err
		close(c.leased)
	}()
	h := c.h
	if c.early == nil {
		return func() {}, nil
	}
	start := c.opened
	if release, err = c.early.wait(); err != nil {
		return nil, err
	}
	if h.opts.OnWriterOpening != nil {
		h.opts.OnWriterOpening(c.name)
	}
	old := ltx.TXID(c.txid.Load())
	newer, lerr := shippedAfter(ctx, store, old)
	if lerr != nil || newer {
		c.replan(ctx, store)
	}
	c.log.Info("cold open: lease taken", "txid", c.txid.Load(), "newer_than_view", newer || lerr != nil, "took", time.Since(start))
	return release, nil
}

// replan replaces the view with one of the bucket's newest state; if that
// cannot be read, reads wait for the restored file instead.
func (c *coldDB) replan(ctx context.Context, store replica.Store) {
	pages, err := restore.OpenPages(ctx, store, restore.Options{}, c.h.opts.ColdOpen.Head())
	if err == nil && pages.Size() == 0 {
		err = restore.ErrNoReplica
	}
	var view *coldopen.View
	if err == nil {
		view, err = coldopen.Open(pages, *c.h.opts.ColdOpen)
	}
	c.mu.Lock()
	old := c.view
	if err != nil {
		c.stale = true
	} else {
		c.view, c.pages = view, pages
		c.txid.Store(uint64(pages.TXID()))
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Info("cold open: the bucket holds a newer state than the view; reads wait for the restore", "err", err)
		return
	}
	old.Close()
}

// hydrate restores the local file, then hands over under the name lock:
// the view is closed once the reads on it ended, the database is opened
// from the file, and only then does the host return it for name.
func (c *coldDB) hydrate(ctx context.Context, store replica.Store, path string) {
	h := c.h
	release, lerr := c.takeLease(ctx, store)
	if lerr != nil {
		c.end(ctx, lerr)
		return
	}
	t := time.NewTimer(hydrateDelay)
	select {
	case <-c.kick:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	start := time.Now()
	restored, err := h.restore(ctx, store, path, c.log)
	if err == nil && !restored {
		err = dberr.ForDatabase(dberr.CodeUnavailable, c.name, "database "+quote(c.name)+": its replica was emptied while it was restored; retry")
	}
	var unlock func()
	if err == nil {
		// Not h.lock: Delete and Close hold the name while they wait for us.
		for unlock == nil && ctx.Err() == nil {
			if u, ok := h.tryLock(c.name); ok {
				unlock = u
			} else {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	if (err == nil && h.isClosed()) || (ctx.Err() != nil) {
		err = dberr.ForDatabase(dberr.CodeUnavailable, c.name, "database "+quote(c.name)+": closed while it was restored; retry")
	}
	c.mu.Lock() // waits for the reads on the view
	c.over = true
	c.mu.Unlock()
	st := c.view.Stats()
	c.view.Close()
	served := c.Bookmark()
	if err == nil {
		var db *database
		if db, err = h.start(ctx, c.name, path, store, c.log); err == nil && uint64(db.rep.Pos().TXID) < uint64(served) {
			c.log.Warn("cold open: the restored file is older than the reads served before it", "served", uint64(served), "restored", uint64(db.rep.Pos().TXID))
		}
	}
	if unlock != nil {
		unlock()
	}
	if err != nil && ctx.Err() == nil && !h.isClosed() {
		h.mu.Lock()
		if h.noCold == nil {
			h.noCold = map[string]bool{}
		}
		h.noCold[c.name] = true
		h.mu.Unlock()
	}
	switch {
	case err != nil && ctx.Err() != nil:
		release()
		c.log.Info("cold open: restore stopped: the database was closed or deleted", "took", time.Since(start))
	case err != nil:
		release()
		c.log.Warn("cold open: restore did not complete; the database is not open", "err", err, "took", time.Since(start))
	default:
		c.log.Info("cold open: restored; requests now use the local file", "reads_on_demand", st.Reads,
			"cache_hits", st.Hits, "cache_misses", st.Misses, "pages_fetched", st.Fetched, "requests", st.Requests,
			"fetched_bytes", st.Bytes, "bytes", c.pages.Size(), "restore_took", time.Since(start), "since_open", time.Since(c.opened))
	}
	c.finish(err)
}

// end ends a cold open whose lease could not be taken (held by another
// instance, or the store refused): the view closes and the error, a
// *NotLeaderError for another holder, answers whoever waits; the next
// request opens the database as usual (and is sent to the holder). No
// mark against cold opens: the replica is fine.
func (c *coldDB) end(ctx context.Context, err error) {
	c.mu.Lock()
	c.over = true
	c.mu.Unlock()
	c.view.Close()
	if ctx.Err() != nil {
		c.log.Info("cold open: stopped before the lease was taken: the database was closed or deleted")
	} else {
		c.log.Info("cold open: the lease could not be taken; reads on demand end here", "err", err)
	}
	c.finish(err)
}

// finish publishes the outcome and takes c out of the host's table.
func (c *coldDB) finish(err error) {
	c.err = err
	h := c.h
	h.mu.Lock()
	if h.cold[c.name] == c {
		delete(h.cold, c.name)
	}
	h.mu.Unlock()
	close(c.done)
}

// stopCold cancels name's hydration, if any, and waits for it to end;
// it reports whether there was one.
func (h *Host) stopCold(name string) bool {
	c := h.coldFor(name)
	if c != nil {
		c.cancel()
		<-c.done
	}
	return c != nil
}

// stopColds cancels every hydration (Close) and waits for them.
func (h *Host) stopColds() {
	h.mu.Lock()
	var all []*coldDB
	for _, c := range h.cold {
		all = append(all, c)
	}
	h.mu.Unlock()
	for _, c := range all {
		c.cancel()
		<-c.done
	}
}

// getCold is openCold as a Database: nil (not a typed nil) when not cold.
func (h *Host) getCold(ctx context.Context, name string) (Database, error) {
	if c := h.coldFor(name); c != nil {
		return c, nil
	}
	c, err := h.openCold(ctx, name)
	if c == nil || err != nil {
		return nil, err
	}
	return c, nil
}

// shippedAfter reports whether level 0 holds a file past txid: shipped
// after a listing that found txid the newest.
func shippedAfter(ctx context.Context, store replica.Store, txid ltx.TXID) (bool, error) {
	objs, err := replica.ListAfter(ctx, store, replica.LTXLevelPrefix(0), replica.LTXKey(0, txid, txid))
	if err != nil {
		return false, err
	}
	for _, o := range objs {
		if _, _, max, err := replica.ParseLTXKey(o.Key); err == nil && max > txid {
			return true, nil
		}
	}
	return false, nil
}

// Hydrating is how many databases answer reads on demand while they are
// restored (metrics).
func (h *Host) Hydrating() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cold)
}

// earlyLease is a lease asked for in the background, beside the plan.
type earlyLease struct {
	done    chan struct{}
	release func()
	err     error
	cancel  context.CancelFunc // ends the context it was asked under, once handed on
}

// askLease starts taking name's lease (nil when leases are off).
func (h *Host) askLease(ctx context.Context, name string, store replica.Store) *earlyLease {
	if h.leases == nil {
		return nil
	}
	e := &earlyLease{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		e.release, e.err = h.acquireLease(ctx, name, store)
	}()
	return e
}

func (e *earlyLease) wait() (func(), error) {
	<-e.done
	return e.release, e.err
}

// handLease keeps a lease asked for by a cold open that did not start, for
// the open the caller runs next under the same name lock (takeHandedLease):
// asking again would cost its round trips twice.
func (h *Host) handLease(name string, e *earlyLease, cancel context.CancelFunc) {
	if e == nil {
		cancel()
		return
	}
	e.cancel = cancel
	h.mu.Lock()
	if h.handed == nil {
		h.handed = map[string]*earlyLease{}
	}
	h.handed[name] = e
	h.mu.Unlock()
}

// takeHandedLease returns the lease a cold open of name handed on, if any.
func (h *Host) takeHandedLease(name string) *earlyLease {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.handed[name]
	delete(h.handed, name)
	return e
}

// abandon releases the lease if it was taken: the cold open did not start.
func (e *earlyLease) abandon() {
	if e == nil {
		return
	}
	if release, err := e.wait(); err == nil {
		release()
	}
}

// AwaitsLease reports whether db is a database opened cold whose lease is
// not settled yet: a read of it may run on the view (a state the bucket
// holds, as a follower's), while a write or a session waits (AwaitWriter).
func AwaitsLease(db Database) bool {
	c, ok := db.(*coldDB)
	if !ok {
		return false
	}
	select {
	case <-c.leased:
		return false
	default:
		return true
	}
}

// AwaitWriter waits, for a database opened cold, until its lease is settled,
// and returns the *NotLeaderError when another instance holds it: a request
// routed here must then go to that instance, since a write on the cold
// database could only fail. For any other database it returns nil at once.
func AwaitWriter(ctx context.Context, db Database) error {
	c, ok := db.(*coldDB)
	if !ok {
		return nil
	}
	select {
	case <-c.leased:
		return c.leaseErr
	case <-ctx.Done():
		return ctx.Err()
	}
}
