package dbhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/groupcommit"
)

// localFileSuffixes are the files of one database: SQLite's and the
// engine's record of its replicated position.
var localFileSuffixes = []string{"", "-wal", "-shm", "-sluice"}

// Host opens, creates, restores and deletes the databases under DataDir.
type Host struct {
	opts Options

	mu        sync.Mutex
	dbs       map[string]*database
	locks     map[string]*nameLock // serialises open/create/delete per name
	closed    bool
	leases    *lease.Table             // nil without Options.Lease
	stop      chan struct{}            // ends the idle sweeper
	bucket    bucketNames              // databases found in the replica, for List
	opening   int                      // slots reserved by databases being opened (under mu)
	evicting  sync.WaitGroup           // evictions under way; Close waits for them
	evictions atomic.Int64             // databases closed for being idle (tests, metrics)
	uploads   *groupcommit.UploadSlots // shared by every database's write path; nil: unbounded
	cold      map[string]*coldDB       // databases answering on demand while restored (cold.go), under mu
	noCold    map[string]bool          // databases whose restore after a cold open failed: no cold open again (cold.go)
	handed    map[string]*earlyLease   // leases a cold open that did not start hands to the open that follows (cold.go), under mu
	adopted   map[string]adoptedCopy   // follower copies made databases (adopt.go), under mu
}

// New returns a Host; databases open lazily on first use.
func New(opts Options) (*Host, error) {
	opts.setDefaults()
	if opts.Store == nil || opts.Replication.Restore == nil {
		return nil, errNoReplication
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", opts.DataDir, err)
	}
	h := &Host{opts: opts, dbs: map[string]*database{}, locks: map[string]*nameLock{}}
	if opts.Lease != nil {
		h.leases = lease.NewTable(*opts.Lease, opts.Logger, func(ctx context.Context, name string) error {
			_, err := h.Get(ctx, name)
			return err
		})
	}
	if opts.MaxUploads > 0 {
		h.uploads = groupcommit.NewUploadSlots(opts.MaxUploads)
	}
	h.stop = make(chan struct{})
	if opts.IdleTimeout > 0 {
		go h.sweepIdle(h.stop)
	}
	return h, nil
}

func (h *Host) path(name string) string { return filepath.Join(h.opts.DataDir, name+".db") }

// nameLock serialises open/create/delete/evict of one name. An entry lives
// only while someone holds or waits for it, so that names asked for once
// (a client trying thousands of names) leave nothing behind.
type nameLock struct {
	sync.Mutex
	refs int // holders and waiters, under Host.mu
}

func (h *Host) nameLock(name string) *nameLock {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.locks[name]
	if l == nil {
		l = &nameLock{}
		h.locks[name] = l
	}
	l.refs++
	return l
}

func (h *Host) releaseName(name string, l *nameLock) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.refs--; l.refs == 0 && h.locks[name] == l {
		delete(h.locks, name)
	}
}

func (h *Host) lock(name string) func() {
	l := h.nameLock(name)
	l.Lock()
	return func() {
		l.Unlock()
		h.releaseName(name, l)
	}
}

// tryLock is lock that gives up at once when the name is held.
func (h *Host) tryLock(name string) (unlock func(), ok bool) {
	l := h.nameLock(name)
	if !l.TryLock() {
		h.releaseName(name, l)
		return nil, false
	}
	return func() {
		l.Unlock()
		h.releaseName(name, l)
	}, true
}

// NameLocks is how many per-name locks exist (tests: they are freed).
func (h *Host) NameLocks() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.locks)
}

func (h *Host) cached(name string) (*database, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, dberr.New(dberr.CodeUnavailable, "server is shutting down")
	}
	db := h.dbs[name]
	if db != nil {
		db.touch()
	}
	return db, nil
}

// NotFound is the NOT_FOUND error of a database that exists neither here
// nor in the replica.
func NotFound(name string) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeNotFound, name, "database "+quote(name)+" does not exist here or in the replica; create it with PUT /v1/databases/"+name)
}

// Get returns the database, opening the local file or restoring it from the
// replica on first use. The default database is created if it exists nowhere.
func (h *Host) Get(ctx context.Context, name string) (Database, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if h.opts.FollowOnly {
		return nil, h.followOnlyLeader(ctx, name)
	}
	if db, err := h.cached(name); db != nil || err != nil {
		return db, err
	}
	if c := h.coldFor(name); c != nil {
		return c, nil
	}
	unlock := h.lock(name)
	defer unlock()
	if db, err := h.cached(name); db != nil || err != nil { // opened while we waited for the lock
		return db, err
	}
	if !h.leaseTaken(name) { // taken to write: restored whole at once (taken.go)
		if c, err := h.getCold(ctx, name); c != nil || err != nil {
			return c, err
		}
	}
	db, err := h.open(ctx, name, name == DefaultDatabase, false)
	if err != nil {
		return nil, err
	}
	return db, nil
}

// Create creates a new empty database. It is ALREADY_EXISTS if the database exists
// locally or in the replica (which is then restored and opened).
func (h *Host) Create(ctx context.Context, name string) (Database, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if h.opts.FollowOnly {
		return nil, h.followOnlyLeader(ctx, name)
	}
	unlock := h.lock(name)
	defer unlock()
	if db, err := h.cached(name); db != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return nil, dberr.ForDatabase(dberr.CodeExists, name, "database "+quote(name)+" already exists")
	}
	if _, err := os.Stat(h.path(name)); err == nil {
		return nil, dberr.ForDatabase(dberr.CodeExists, name, "database "+quote(name)+" already exists")
	}
	return h.open(ctx, name, true, true)
}

// Info describes one database in a listing.
type Info struct {
	Name      string `json:"name"`
	Local     bool   `json:"local"`      // false: only in the replica; the first use restores it
	SizeBytes int64  `json:"size_bytes"` // database file plus WAL
	Open      bool   `json:"open"`
	TXID      uint64 `json:"txid"`      // replication position (last TXID in the bucket); 0 if not open
	Unshipped int    `json:"unshipped"` // commits not yet in the bucket
	Fenced    bool   `json:"fenced,omitempty"`
}

// Stats returns the state of every open database (for metrics).
func (h *Host) Stats() []Stats {
	h.mu.Lock()
	dbs := make([]*database, 0, len(h.dbs))
	for _, db := range h.dbs {
		dbs = append(dbs, db)
	}
	h.mu.Unlock()
	out := make([]Stats, len(dbs))
	for i, db := range dbs {
		out[i] = db.stats()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close finishes every queued write group, ships it, and closes every
// database. Call it after the HTTP server has stopped taking requests.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		close(h.stop)
	}
	h.closed = true
	h.mu.Unlock()
	h.stopColds() // before the snapshot below: a hand-over may add a database
	h.mu.Lock()
	dbs := h.dbs
	h.dbs = map[string]*database{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, len(dbs))
	for _, db := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- db.close(ctx)
		}()
	}
	wg.Wait()
	h.evicting.Wait()
	if h.leases != nil { // after the final uploads: a waiter may take over now
		h.leases.Close()
	}
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}
