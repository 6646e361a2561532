package timetravel

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Options configure a Cache. Zero values get the defaults in brackets.
type Options struct {
	// Dir holds the restored states; it is emptied at New, so a build a
	// crash interrupted is never served.
	Dir              string
	Store            replica.Store // each database's replica is replica.Sub(Store, name)
	MaxBytes         int64         // restored bytes kept [1 GiB]
	MaxEntries       int           // restored states kept [16]
	ReadConns        int           // read connections per state [2]
	StatementTimeout time.Duration // per statement [5s]
	BuildTimeout     time.Duration // one restore [10m]
	// Revalidate: a cached state is served without the bucket for this
	// long after the replica was last seen to hold the history it came
	// from (its base snapshot's header); then one range read checks again,
	// so a database purged and created anew is never answered from the old
	// one's states [1s].
	Revalidate time.Duration
	// OnDemand, if set, answers reads on a state while it is restored,
	// fetching only the pages they touch (server/coldopen); nil: reads
	// wait for the restore.
	OnDemand *coldopen.Options
	Logger   *slog.Logger
}

func (o *Options) setDefaults() {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 1 << 30
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 16
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 2
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.Revalidate <= 0 {
		o.Revalidate = time.Second
	}
	if o.BuildTimeout <= 0 {
		o.BuildTimeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Cache holds restored past states, least recently used evicted first
// once over its byte or entry budget. A state in use or being built is
// never evicted, so the budget can be passed while they last.
type Cache struct {
	opts     Options
	mu       sync.Mutex
	entries  map[key]*entry
	bytes    int64
	closed   bool
	builds   atomic.Int64
	sessions atomic.Int64 // open View sessions
	colds    atomic.Int64 // states read on demand now (at most maxColds)
	// times remembers what a time resolved to (a TXID with later commits
	// after it), so that repeated reads at a time skip the bucket.
	times map[timeKey]ltx.TXID
	// planned: plans made while a TXID was resolved, for the build that
	// follows to read on demand without listing again (see planned.go).
	planned map[key]restore.Listed
}

type key struct {
	name string
	txid ltx.TXID
}

// entry is one restored state. ready closes when the build ended; err (set
// before) says it failed, and the entry has then left the map.
type entry struct {
	key      key
	started  time.Time // when the build began (its point resolved just before)
	ready    chan struct{}
	err      error
	path     string
	size     int64
	readers  chan *sqlconn.Handle
	refs     int // acquired and not released (under Cache.mu)
	lastUsed time.Time
	evicted  bool
	// The history the state came from: the plan's base snapshot and its
	// header, and when the replica was last seen to hold it (under mu).
	base    replica.LTXFile
	baseHdr ltx.Header
	checked time.Time
	// While the restore runs: the state read page by page. coldUp closes
	// once cold is set or could not be; coldMu is held shared by reads on
	// it and taken to close it once the restore is done (coldOver).
	cold     *coldopen.View
	coldUp   chan struct{}
	coldMu   sync.RWMutex
	coldOver bool
	answered chan struct{} // closed once a read on cold was answered (see restoreDelay)
	answerOn sync.Once
}

// New empties opts.Dir and returns a Cache over it.
func New(opts Options) (*Cache, error) {
	opts.setDefaults()
	if err := os.RemoveAll(opts.Dir); err != nil {
		return nil, fmt.Errorf("time travel: empty %s: %w", opts.Dir, err)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("time travel: create %s: %w", opts.Dir, err)
	}
	return &Cache{opts: opts, entries: map[key]*entry{}, times: map[timeKey]ltx.TXID{}, planned: map[key]restore.Listed{}}, nil
}

// Builds is the number of states restored so far.
func (c *Cache) Builds() int64 { return c.builds.Load() }

// At returns database name at point p, read-only: every write on it fails
// with SQLITE_READONLY. The state is restored before At returns (or found
// in the cache), or with OnDemand readable page by page while its restore
// runs, so errors about the point come from At.
func (c *Cache) At(ctx context.Context, name string, p Point) (dbhost.Database, error) {
	if err := dbhost.ValidateName(name); err != nil {
		return nil, err
	}
	txid := p.TXID
	if !p.Time.IsZero() {
		txid = c.resolvedTime(name, p.Time)
	}
	// A TXID's state never changes: one built (from the history the
	// replica still holds) is served as it is.
	if txid == 0 || !c.usable(ctx, key{name, txid}) {
		resolved, newest, listed, err := resolveListed(ctx, c.opts.Store, name, p)
		if err != nil {
			return nil, err
		}
		c.keepPlan(key{name, resolved}, listed)
		if !p.Time.IsZero() && resolved < newest {
			// A later commit exists, stamped after p.Time: no commit to
			// come can change what the time resolves to.
			c.rememberTime(name, p.Time, resolved)
		}
		txid = resolved
		if k := (key{name, txid}); c.built(k) && !c.current(ctx, k) {
			c.Forget(name) // built from a history the replica no longer holds
		}
	}
	k := key{name, txid}
	e, err := c.acquireFor(ctx, k, true)
	if err != nil {
		return nil, err
	}
	c.release(e)
	return &View{c: c, k: k}, nil
}

// current reports whether k's built state still belongs to the database's
// history: checked within Revalidate, or its base snapshot is unchanged.
func (c *Cache) current(ctx context.Context, k key) bool {
	c.mu.Lock()
	e := c.entries[k]
	if e == nil || time.Since(e.checked) < c.opts.Revalidate {
		c.mu.Unlock()
		return e != nil
	}
	base, want := e.base, e.baseHdr
	c.mu.Unlock()
	hdr, err := replica.ReadHeader(ctx, replica.Sub(c.opts.Store, k.name), base)
	if err != nil || hdr != want {
		return false
	}
	c.mu.Lock()
	e.checked = time.Now()
	c.mu.Unlock()
	return true
}

// Forget drops every cached state of database name (deleted, or created
// anew) and what its times resolved to; states in use close when released.
func (c *Cache) Forget(name string) {
	c.mu.Lock()
	var drop []*entry
	for k, e := range c.entries {
		if k.name != name || !isDone(e) {
			continue
		}
		delete(c.entries, k)
		if e.err != nil {
			continue
		}
		c.bytes -= e.size
		e.evicted = true
		if e.refs == 0 {
			drop = append(drop, e)
		}
	}
	for tk := range c.times {
		if tk.name == name {
			delete(c.times, tk)
		}
	}
	c.mu.Unlock()
	for _, e := range drop {
		e.close()
	}
}

// maxTimes bounds the remembered resolutions of times to TXIDs.
const maxTimes = 4096

type timeKey struct {
	name string
	t    int64 // unix nanoseconds
}

// resolvedTime is the TXID time t of database name resolved to before, or 0.
func (c *Cache) resolvedTime(name string, t time.Time) ltx.TXID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.times[timeKey{name, t.UnixNano()}]
}

func (c *Cache) rememberTime(name string, t time.Time, txid ltx.TXID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.times) >= maxTimes {
		clear(c.times)
	}
	c.times[timeKey{name, t.UnixNano()}] = txid
}

// built reports whether k's state is restored and cached.
func (c *Cache) built(k key) bool {
	if k.txid == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[k]
	return e != nil && isDone(e) && e.err == nil
}

// acquire returns k's built state, building it if no one is; the caller
// must release it.
func (c *Cache) acquire(ctx context.Context, k key) (*entry, error) {
	return c.acquireFor(ctx, k, false)
}

// acquireFor is acquire; early: return as soon as the state can be read
// on demand (entry.cold), before its restore ends.
func (c *Cache) acquireFor(ctx context.Context, k key, early bool) (*entry, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, dberr.New(dberr.CodeUnavailable, "server is shutting down")
	}
	e := c.entries[k]
	if e == nil {
		e = &entry{key: k, started: time.Now(), ready: make(chan struct{}), coldUp: make(chan struct{}), answered: make(chan struct{})}
		c.entries[k] = e
		// Detached from ctx: the requests sharing the build must not fail
		// because the first one gave up.
		go c.build(e)
	}
	e.refs++
	c.mu.Unlock()
	var coldUp chan struct{}
	if early {
		coldUp = e.coldUp
	}
	select {
	case <-e.ready:
	case <-coldUp:
		if e.cold != nil {
			return e, nil
		}
		select { // no view: wait for the restore
		case <-e.ready:
		case <-ctx.Done():
			c.release(e)
			return nil, dberr.ForDatabase(dberr.CodeTimeout, k.name, fmt.Sprintf("database %q at TXID %d: the past state is still being restored: %v; retry", k.name, k.txid, ctx.Err()))
		}
	case <-ctx.Done():
		c.release(e)
		return nil, dberr.ForDatabase(dberr.CodeTimeout, k.name, fmt.Sprintf("database %q at TXID %d: the past state is still being restored: %v; retry", k.name, k.txid, ctx.Err()))
	}
	if e.err != nil {
		c.release(e)
		return nil, e.err
	}
	return e, nil
}

func (c *Cache) release(e *entry) {
	c.mu.Lock()
	e.refs--
	e.lastUsed = time.Now()
	var drop []*entry
	if e.evicted && e.refs == 0 && e.err == nil {
		drop = append(drop, e)
	}
	drop = append(drop, c.evictLocked()...)
	c.mu.Unlock()
	for _, d := range drop {
		d.close()
	}
}

// build restores e's state to a file of its own: restore writes a temp
// file and links it into place only once complete and checked.
func (c *Cache) build(e *entry) {
	start := time.Now()
	k := e.key
	dir := filepath.Join(c.opts.Dir, k.name)
	e.path = filepath.Join(dir, strconv.FormatUint(uint64(k.txid), 10)+".db")
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.BuildTimeout)
	defer cancel()
	coldDone := make(chan struct{})
	go func() { defer close(coldDone); c.openCold(ctx, e) }()
	waitFirstAnswer(e)
	err := os.MkdirAll(dir, 0o755)
	var res restore.Result
	if err == nil {
		removeFiles(e.path) // an earlier entry's, whose removal failed
		res, err = restore.Restore(ctx, replica.Sub(c.opts.Store, k.name), e.path, restore.Options{TXID: k.txid})
	}
	if err == nil && len(res.Files) > 0 {
		e.base = res.Files[0]
		e.baseHdr, err = replica.ReadHeader(ctx, replica.Sub(c.opts.Store, k.name), e.base)
		e.checked = time.Now()
	}
	if err == nil {
		err = e.open(c.opts)
	}
	if err == nil {
		var st os.FileInfo
		if st, err = os.Stat(e.path); err == nil {
			e.size = st.Size()
		}
	}
	<-coldDone
	if e.cold != nil { // once the reads on it ended
		e.coldMu.Lock()
		e.coldOver = true
		e.coldMu.Unlock()
		st := e.cold.Stats()
		e.cold.Close()
		c.colds.Add(-1)
		c.opts.Logger.Info("time travel: reads answered on demand while the past state was restored", "db", k.name, "txid", uint64(k.txid),
			"reads", st.Reads, "pages_fetched", st.Fetched, "requests", st.Requests, "bytes_fetched", st.Bytes)
	}
	c.mu.Lock()
	if err != nil {
		e.err = &dberr.Error{Code: dberr.CodeUnavailable, Name: k.name, Err: err,
			Message: fmt.Sprintf("database %q at TXID %d: restore of the past state failed: %v; retry", k.name, k.txid, err)}
		if c.entries[k] == e {
			delete(c.entries, k)
		}
	} else {
		c.bytes += e.size
		c.builds.Add(1)
	}
	closed := c.closed
	c.mu.Unlock()
	if err != nil {
		e.close()
		c.opts.Logger.Warn("time travel: restore of a past state failed", "db", k.name, "txid", uint64(k.txid), "err", err)
	} else {
		c.opts.Logger.Info("time travel: past state restored", "db", k.name, "txid", uint64(k.txid),
			"files", len(res.Files), "bytes_fetched", res.Bytes, "size", e.size, "took", time.Since(start).Round(time.Millisecond))
	}
	close(e.ready)
	if closed && err == nil {
		c.mu.Lock()
		e.evicted = true
		c.mu.Unlock()
	}
}

// maxColds bounds the past states read on demand at once (each with its
// page cache and connections).
const maxColds = 4

// openCold sets e.cold, the state read page by page, unless on-demand
// reads are off or the state cannot be read that way (the restore then
// reports why); coldUp closes either way.
func (c *Cache) openCold(ctx context.Context, e *entry) {
	defer close(e.coldUp)
	if c.opts.OnDemand == nil {
		return
	}
	if c.colds.Add(1) > maxColds { // enough page caches: this read waits for the restore
		c.colds.Add(-1)
		return
	}
	ok := false
	defer func() {
		if !ok {
			c.colds.Add(-1)
		}
	}()
	start := time.Now()
	var pages *restore.Pages
	var err error
	if listed, ok := c.takePlan(e.key); ok {
		pages, err = restore.OpenPagesPlanned(ctx, replica.Sub(c.opts.Store, e.key.name), listed, c.opts.OnDemand.Head())
	} else {
		pages, err = restore.OpenPages(ctx, replica.Sub(c.opts.Store, e.key.name), restore.Options{TXID: e.key.txid}, c.opts.OnDemand.Head())
	}
	if err != nil || pages.TXID() != e.key.txid || pages.Size() == 0 {
		return
	}
	view, err := coldopen.Open(pages, *c.opts.OnDemand)
	if err != nil {
		c.opts.Logger.Warn("time travel: cannot read the past state on demand; reads wait for its restore", "db", e.key.name, "txid", uint64(e.key.txid), "err", err)
		return
	}
	e.cold, ok = view, true
	st := view.Stats()
	c.opts.Logger.Info("time travel: answering reads on demand while the past state is restored", "db", e.key.name, "txid", uint64(e.key.txid),
		"files", pages.Files(), "requests", st.Requests, "bytes_fetched", st.Bytes, "took", time.Since(start).Round(time.Millisecond))
}

// evictLocked takes the least recently used idle states out of the map
// until the budget holds; the caller closes them after unlocking.
func (c *Cache) evictLocked() []*entry {
	var out []*entry
	for c.bytes > c.opts.MaxBytes || c.builtLocked() > c.opts.MaxEntries {
		var lru *entry
		for _, e := range c.entries {
			if !isDone(e) || e.err != nil || e.refs > 0 {
				continue
			}
			if lru == nil || e.lastUsed.Before(lru.lastUsed) {
				lru = e
			}
		}
		if lru == nil {
			break
		}
		lru.evicted = true
		delete(c.entries, lru.key)
		c.bytes -= lru.size
		out = append(out, lru)
	}
	return out
}

func (c *Cache) builtLocked() int {
	n := 0
	for _, e := range c.entries {
		if isDone(e) && e.err == nil {
			n++
		}
	}
	return n
}

func isDone(e *entry) bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// Close closes every idle state and removes the directory's files; states
// in use are removed when released.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	var drop []*entry
	for k, e := range c.entries {
		if isDone(e) && e.err == nil && e.refs == 0 {
			drop = append(drop, e)
			delete(c.entries, k)
		} else {
			e.evicted = true
		}
	}
	c.mu.Unlock()
	for _, e := range drop {
		e.close()
	}
}

// open opens the state's read connections: the server's read setup
// (statement guard, query_only, statement time limit).
func (e *entry) open(o Options) error {
	e.readers = make(chan *sqlconn.Handle, o.ReadConns)
	for i := 0; i < o.ReadConns; i++ {
		h, err := sqlconn.Open(e.path, sqlconn.SharedReader, o.StatementTimeout)
		if err != nil {
			return err
		}
		e.readers <- h
	}
	return nil
}

// close closes the connections and removes the files.
func (e *entry) close() {
	if e.readers != nil {
		close(e.readers)
		for h := range e.readers {
			_ = h.Close()
		}
		e.readers = nil
	}
	if e.path != "" {
		removeFiles(e.path)
	}
}

func removeFiles(path string) {
	for _, s := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + s)
	}
}
