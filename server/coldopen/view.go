// Package coldopen answers reads on a database that exists only in the
// bucket before it is restored: SQLite reads the state through a read-only
// VFS whose pages are fetched on demand from the LTX files that hold their
// newest versions (restore.Pages: the restore plan and the files' page
// indexes), with read-ahead in the same range read and a bounded cache of
// decoded pages. The full restore (hydration) runs beside it; the host hands
// over to the restored file once it is complete.
//
// It imports restore, server/sqlconn, server/dberr and internal/sqliteconn;
// server/dbhost uses it.
package coldopen

import (
	"container/list"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Options configure a View. Zero values get the defaults in brackets.
type Options struct {
	CacheBytes       int64         // decoded pages kept [32 MiB]
	ReadAhead        int64         // bytes of an LTX file read per page missed [256 KiB]
	ReadConns        int           // read connections [4]
	StatementTimeout time.Duration // per statement [5s]
	FetchTimeout     time.Duration // one range read [30s]
}

func (o *Options) setDefaults() {
	if o.CacheBytes <= 0 {
		o.CacheBytes = 32 << 20
	}
	if o.ReadAhead <= 0 {
		o.ReadAhead = 256 << 10
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 30 * time.Second
	}
}

// Stats is what a view cost so far.
type Stats struct {
	Reads     int64 // Read calls answered
	Hits      int64 // pages SQLite read from the cache
	Misses    int64 // pages SQLite read that had to be fetched
	Fetched   int64 // pages decoded from fetched ranges (read-ahead included)
	Requests  int64 // range reads of the store, page indexes included
	Bytes     int64 // bytes those returned
	Evictions int64 // pages dropped from the cache for its bound
	Views     int64 // Totals only: views opened
}

// View is one state of a database served on demand.
type View struct {
	pages *restore.Pages
	opts  Options
	file  string // its name in the VFS
	ctx   context.Context
	stop  context.CancelFunc

	readers chan *sqlconn.Handle

	mu       sync.Mutex
	cache    map[uint32]*list.Element // of *cached
	lru      list.List                // front: most recently used
	bytes    int64
	inflight map[uint32]chan struct{}

	reads, hits, misses, fetched, evictions atomic.Int64
	failures                                atomic.Int64 // fetches that failed
	lastFailure                             atomic.Pointer[error]
}

type cached struct {
	pgno uint32
	page []byte
}

var seq atomic.Uint64

// totals add up every view's Stats since the process started (metrics).
var totals struct{ hits, misses, fetched, requests, bytes, views atomic.Int64 }

// Totals is the sum of every view's Stats since the process started (Reads
// and Evictions left out), and how many views were opened.
func Totals() Stats {
	return Stats{Views: totals.views.Load(), Hits: totals.hits.Load(), Misses: totals.misses.Load(),
		Fetched: totals.fetched.Load(), Requests: totals.requests.Load(), Bytes: totals.bytes.Load()}
}

// Open serves pages' state through read-only connections.
func Open(pages *restore.Pages, opts Options) (*View, error) {
	opts.setDefaults()
	name, err := registerVFS()
	if err != nil {
		return nil, fmt.Errorf("register the cold-open VFS: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	v := &View{pages: pages, opts: opts, ctx: ctx, stop: stop,
		file:     "cold-" + strconv.FormatUint(seq.Add(1), 10) + ".db",
		cache:    map[uint32]*list.Element{},
		inflight: map[uint32]chan struct{}{},
		readers:  make(chan *sqlconn.Handle, opts.ReadConns)}
	pages.Warm(func(n uint32, page []byte) { v.fetched.Add(1); totals.fetched.Add(1); v.put(n, v.prepare(n, page)) })
	totals.views.Add(1)
	totals.requests.Add(pages.Requests())
	totals.bytes.Add(pages.Bytes())
	views.Store(v.file, v)
	uri := "file:/" + v.file + "?vfs=" + url.QueryEscape(name) + "&immutable=1"
	for range opts.ReadConns {
		c, err := sqliteconn.Open(uri, sqlite.OpenReadOnly|sqlite.OpenURI)
		var h *sqlconn.Handle
		if err == nil {
			h, err = sqlconn.Wrap(c, sqlconn.SharedReader, opts.StatementTimeout)
		}
		if err != nil {
			v.Close()
			return nil, fmt.Errorf("open a read connection on demand: %w", err)
		}
		v.readers <- h
	}
	return v, nil
}

// Read runs fn on one of the view's read-only connections.
func (v *View) Read(ctx context.Context, fn func(sqlconn.Conn) error) error {
	var h *sqlconn.Handle
	select {
	case h = <-v.readers:
	case <-ctx.Done():
		return sqlconn.Translate(ctx.Err())
	}
	defer func() { v.readers <- h }()
	v.reads.Add(1)
	failed := v.failures.Load()
	err := h.Call(fn)
	if !h.Autocommit() {
		_ = h.Run("ROLLBACK")
	}
	if err != nil && v.failures.Load() != failed {
		// SQLite saw a disk I/O error; say what it was.
		if last := v.lastFailure.Load(); last != nil {
			return dberr.New(dberr.CodeUnavailable, "reading the database's pages from the bucket failed (it is not restored yet): "+(*last).Error()+"; retry")
		}
	}
	return err
}

// Close closes the connections (the caller has ended every Read) and
// drops the cache.
func (v *View) Close() {
	v.stop()
	close(v.readers)
	for h := range v.readers {
		_ = h.Close()
	}
	views.Delete(v.file)
	v.mu.Lock()
	v.cache, v.bytes = map[uint32]*list.Element{}, 0
	v.lru.Init()
	v.mu.Unlock()
}

// Stats reports the view's cost so far.
func (v *View) Stats() Stats {
	return Stats{Reads: v.reads.Load(), Hits: v.hits.Load(), Misses: v.misses.Load(), Fetched: v.fetched.Load(),
		Requests: v.pages.Requests(), Bytes: v.pages.Bytes(), Evictions: v.evictions.Load()}
}

// page returns page pgno, from the cache or fetched (with read-ahead);
// concurrent misses of one page share one fetch. The slice is never
// modified: the caller may read it after it left the cache.
func (v *View) page(pgno uint32) ([]byte, error) {
	for {
		v.mu.Lock()
		if e, ok := v.cache[pgno]; ok {
			v.lru.MoveToFront(e)
			v.mu.Unlock()
			v.hits.Add(1)
			totals.hits.Add(1)
			return e.Value.(*cached).page, nil
		}
		if wait, ok := v.inflight[pgno]; ok {
			v.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-v.ctx.Done():
				return nil, v.ctx.Err()
			}
		}
		done := make(chan struct{})
		v.inflight[pgno] = done
		v.mu.Unlock()
		v.misses.Add(1)
		totals.misses.Add(1)
		req, by := v.pages.Requests(), v.pages.Bytes()
		page, err := v.fetch(pgno)
		totals.requests.Add(v.pages.Requests() - req)
		totals.bytes.Add(v.pages.Bytes() - by)
		if err != nil {
			v.lastFailure.Store(&err)
			v.failures.Add(1)
		}
		v.mu.Lock()
		delete(v.inflight, pgno)
		v.mu.Unlock()
		close(done)
		return page, err
	}
}

func (v *View) fetch(pgno uint32) ([]byte, error) {
	ctx, cancel := context.WithTimeout(v.ctx, v.opts.FetchTimeout)
	defer cancel()
	var want []byte
	err := v.pages.Fetch(ctx, pgno, v.opts.ReadAhead, func(n uint32, page []byte) {
		b := v.prepare(n, page)
		if n == pgno {
			want = b
		}
		v.fetched.Add(1)
		totals.fetched.Add(1)
		v.put(n, b)
	})
	return want, err
}

// prepare copies page n for the cache. Page 1 says SQLite's file format
// read/write versions are 1 (rollback journal) instead of 2 (WAL), since
// this VFS has no shared memory and no WAL; no query's answer depends on them.
func (v *View) prepare(n uint32, page []byte) []byte {
	b := append([]byte(nil), page...)
	if n == 1 {
		b[18], b[19] = 1, 1
	}
	return b
}

// put caches page n, evicting the least recently used pages over the bound.
func (v *View) put(n uint32, page []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.cache[n]; ok {
		return
	}
	v.cache[n] = v.lru.PushFront(&cached{pgno: n, page: page})
	v.bytes += int64(len(page))
	for v.bytes > v.opts.CacheBytes && v.lru.Len() > 1 {
		e := v.lru.Back()
		c := v.lru.Remove(e).(*cached)
		delete(v.cache, c.pgno)
		v.bytes -= int64(len(c.page))
		v.evictions.Add(1)
	}
}

// Head is how much of the base snapshot's start to read with the page
// indexes (restore.OpenPages' head): one read-ahead's worth.
func (o Options) Head() int64 {
	o.setDefaults()
	return o.ReadAhead
}
