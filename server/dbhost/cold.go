package dbhost

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
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
// This instance holds the database's lease throughout (when leases are on),
// so nobody writes the replica meanwhile: the view and the restored file are
// the same state, and each request runs wholly on one of them.
type coldDB struct {
	h       *Host
	name    string
	view    *coldopen.View
	pages   *restore.Pages
	log     *slog.Logger
	opened  time.Time
	release func() // the lease, until the hand-over
	cancel  context.CancelFunc

	mu   sync.RWMutex // reads on the view hold it shared; the hand-over takes it
	over bool         // the view is closed: requests go to the host

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
func (c *coldDB) Bookmark() Bookmark { return Bookmark(c.pages.TXID()) }

func (c *coldDB) Read(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	c.mu.RLock()
	if !c.over {
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
	path := h.path(name)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	store := replica.Sub(h.opts.Store, name)
	log := h.opts.Logger.With("db", name)
	start := time.Now()
	// The plan and page indexes are read while the lease is taken (they
	// cost as many round trips): what a previous holder shipped meanwhile
	// is looked for once the lease is ours.
	type planned struct {
		pages *restore.Pages
		err   error
	}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	plan := make(chan planned, 1)
	go func() {
		p, err := restore.OpenPages(pctx, store, restore.Options{}, h.opts.ColdOpen.Head())
		plan <- planned{p, err}
	}()
	release := func() {}
	if h.leases != nil { // nobody writes the replica while the view shows it
		var err error
		if release, err = h.acquireLease(ctx, name, store); err != nil {
			pcancel()
			<-plan
			return nil, err
		}
		if h.opts.OnWriterOpening != nil {
			h.opts.OnWriterOpening(name)
		}
	}
	leased := time.Since(start)
	res := <-plan
	pages, err := res.pages, res.err
	if err == nil && h.leases != nil {
		if newer, lerr := shippedAfter(ctx, store, pages.TXID()); lerr != nil || newer {
			pages, err = restore.OpenPages(ctx, store, restore.Options{}, h.opts.ColdOpen.Head())
		}
	}
	if err == nil && pages.Size() == 0 {
		err = restore.ErrNoReplica
	}
	var view *coldopen.View
	if err == nil {
		view, err = coldopen.Open(pages, *h.opts.ColdOpen)
	}
	if err != nil {
		if !errors.Is(err, restore.ErrNoReplica) && ctx.Err() == nil {
			log.Warn("cold open: cannot read the replica page by page; restoring it whole before answering", "err", err)
		}
		release()
		return nil, nil
	}
	hctx, cancel := context.WithCancel(context.Background())
	c := &coldDB{h: h, name: name, view: view, pages: pages, log: log, opened: start, release: release,
		cancel: cancel, done: make(chan struct{}), kick: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cancel()
		view.Close()
		release()
		return nil, dberr.New(dberr.CodeUnavailable, "server is shutting down")
	}
	if h.cold == nil {
		h.cold = map[string]*coldDB{}
	}
	h.cold[name] = c
	h.mu.Unlock()
	st := view.Stats()
	log.Info("cold open: answering reads on demand while the database is restored", "txid", uint64(pages.TXID()),
		"bytes", pages.Size(), "files", pages.Files(), "requests", st.Requests, "fetched_bytes", st.Bytes, "lease_took", leased, "took", time.Since(start))
	go c.hydrate(hctx, store, path)
	return c, nil
}

// hydrate restores the local file, then hands over under the name lock:
// the view is closed once the reads on it ended, the database is opened
// from the file, and only then does the host return it for name.
func (c *coldDB) hydrate(ctx context.Context, store replica.Store, path string) {
	h := c.h
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
	if err == nil {
		var db *database
		if db, err = h.start(ctx, c.name, path, store, c.log); err == nil && uint64(db.rep.Pos().TXID) != uint64(c.pages.TXID()) {
			c.log.Warn("cold open: the restored file is at another TXID than the reads served before it", "served", uint64(c.pages.TXID()), "restored", uint64(db.rep.Pos().TXID))
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
		c.release()
		c.log.Info("cold open: restore stopped: the database was closed or deleted", "took", time.Since(start))
	case err != nil:
		c.release()
		c.log.Warn("cold open: restore did not complete; the database is not open", "err", err, "took", time.Since(start))
	default:
		c.log.Info("cold open: restored; requests now use the local file", "reads_on_demand", st.Reads,
			"cache_hits", st.Hits, "cache_misses", st.Misses, "pages_fetched", st.Fetched, "requests", st.Requests,
			"fetched_bytes", st.Bytes, "bytes", c.pages.Size(), "restore_took", time.Since(start), "since_open", time.Since(c.opened))
	}
	c.err = err
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
