package dbhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Durability says when a write is acknowledged.
type Durability int

const (
	// Sync answers a write once the LTX file holding it is in the bucket.
	Sync Durability = iota
	// Async answers after the local commit; a background loop uploads.
	Async
)

func (d Durability) String() string {
	if d == Async {
		return "async"
	}
	return "sync"
}

// Observer receives write-path events for metrics. Calls are synchronous
// and must be cheap.
type Observer interface {
	GroupCommitted(db string, requests int, d time.Duration)
	Synced(db string, d time.Duration, err error)
	Shipped(db string, f replica.LTXFile)
}

// Options configure a Host. Zero values get the defaults in brackets.
type Options struct {
	DataDir          string
	Store            replica.Store // each database replicates to Sub(Store, name)
	Replication      Replication
	Durability       Durability
	StatementTimeout time.Duration // per statement [5s]
	UploadTimeout    time.Duration // per Sync [30s]
	MaxGroupRequests int           // requests per write group [1000]
	ReadConns        int           // read connections per database [4]
	MaxSessions      int           // read-write interactive sessions per database [64]
	MaxReadSessions  int           // read-only interactive sessions per database, a separate budget [64]
	// MaxOpen caps the databases open at once; the least recently used idle
	// one is closed to open another (evict.go). [derived from the descriptor
	// limit, at most 256]
	MaxOpen int
	// IdleTimeout closes a database unused for this long [1m]; < 0: never.
	IdleTimeout time.Duration
	Logger      *slog.Logger
	Observer    Observer
	// Lease, if set, makes this instance write a database only while it
	// holds the database's lease (see leases.go). Nil: no leases.
	Lease *lease.Options
	// FollowOnly: never write; serve reads from followers and answer every
	// other use with a *NotLeaderError naming the lease holder (followers.go).
	FollowOnly bool
	Follow     FollowOptions

	// IdempotencyWindow is how long an Idempotency-Key is remembered [24h].
	IdempotencyWindow time.Duration

	// ExternalPoll is how often an open database with nothing to ship looks
	// for commits made to its file by other processes (an sqlite3 shell, a
	// migration tool) and ships them [1s]; < 0: never.
	ExternalPoll time.Duration
	// CommitWindow lets a sync write wait up to this long after its commit
	// for others to share its upload (fewer PUTs, more latency) [0].
	CommitWindow time.Duration
	// MaxUploads bounds the write-path uploads in flight across every
	// database; a database waiting for a slot keeps growing its next upload
	// [DefaultMaxUploads]; < 0: no bound.
	MaxUploads int
}

// DefaultMaxUploads is Options.MaxUploads unless configured: enough to keep
// a remote store's round trips overlapped, few enough that a local one is not
// flooded with small PUTs from many databases at once.
const DefaultMaxUploads = 16

func (o *Options) setDefaults() {
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 30 * time.Second
	}
	if o.MaxGroupRequests <= 0 {
		o.MaxGroupRequests = 1000
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	if o.MaxReadSessions <= 0 {
		o.MaxReadSessions = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = defaultMaxOpen(o.ReadConns, descriptorLimit())
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = time.Minute
	}
	if o.ExternalPoll == 0 {
		o.ExternalPoll = time.Second
	}
	if o.MaxUploads == 0 {
		o.MaxUploads = DefaultMaxUploads
	}
}

// localFileSuffixes are the files of one database: SQLite's and the
// engine's record of its replicated position.
var localFileSuffixes = []string{"", "-wal", "-shm", "-sluice"}

// Host opens, creates, restores and deletes the databases under DataDir.
type Host struct {
	opts Options

	mu        sync.Mutex
	dbs       map[string]*database
	locks     map[string]*sync.Mutex // serialises open/create/delete per name
	closed    bool
	leases    *leaseTable // nil without Options.Lease
	follows   *followTable
	stop      chan struct{}  // ends the idle sweeper
	bucket    bucketNames    // databases found in the replica, for List
	opening   int            // slots reserved by databases being opened (under mu)
	evicting  sync.WaitGroup // evictions under way; Close waits for them
	evictions atomic.Int64   // databases closed for being idle (tests, metrics)
	uploads   *uploadSlots   // nil: uploads unbounded
}

// slots is the host's bound on uploads in flight (nil: none).
func (h *Host) slots() *uploadSlots {
	if h == nil {
		return nil
	}
	return h.uploads
}

// New returns a Host; databases open lazily on first use.
func New(opts Options) (*Host, error) {
	opts.setDefaults()
	if opts.Store == nil || opts.Replication.Open == nil || opts.Replication.Restore == nil {
		return nil, errNoReplication
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", opts.DataDir, err)
	}
	h := &Host{opts: opts, dbs: map[string]*database{}, locks: map[string]*sync.Mutex{},
		follows: &followTable{m: map[string]*followed{}, open: map[string]*sync.Mutex{}}}
	if opts.Lease != nil {
		h.leases = newLeaseTable(h, *opts.Lease)
	}
	if opts.MaxUploads > 0 {
		h.uploads = newUploadSlots(opts.MaxUploads)
	}
	h.stop = make(chan struct{})
	if opts.IdleTimeout > 0 {
		go h.sweepIdle(h.stop)
	}
	return h, nil
}

func (h *Host) path(name string) string { return filepath.Join(h.opts.DataDir, name+".db") }

// nameLock serialises open/create/delete/evict of one name.
func (h *Host) nameLock(name string) *sync.Mutex {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.locks[name]
	if l == nil {
		l = &sync.Mutex{}
		h.locks[name] = l
	}
	return l
}

func (h *Host) lock(name string) func() {
	l := h.nameLock(name)
	l.Lock()
	return l.Unlock
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

func notFound(name string) *dberr.Error {
	return dberr.New(dberr.CodeNotFound, "database "+quote(name)+" does not exist here or in the replica; create it with PUT /v1/databases/"+name)
}

// Get returns the database, opening the local file or restoring it from the
// replica on first use. The default database is created if it exists nowhere.
func (h *Host) Get(ctx context.Context, name string) (Database, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if v := replicaViewFrom(ctx, name); v != nil {
		return v, nil
	}
	if h.opts.FollowOnly {
		return nil, h.followOnlyLeader(ctx, name)
	}
	if db, err := h.cached(name); db != nil || err != nil {
		return db, err
	}
	unlock := h.lock(name)
	defer unlock()
	if db, err := h.cached(name); db != nil || err != nil { // opened while we waited for the lock
		return db, err
	}
	db, err := h.open(ctx, name, name == DefaultDatabase, false)
	if err != nil {
		return nil, err
	}
	return db, nil
}

// Create creates a new empty database. It is a 409 if the database exists
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
		return nil, dberr.New(dberr.CodeExists, "database "+quote(name)+" already exists")
	}
	if _, err := os.Stat(h.path(name)); err == nil {
		return nil, dberr.New(dberr.CodeExists, "database "+quote(name)+" already exists")
	}
	return h.open(ctx, name, true, true)
}

// open opens name (the caller holds its lock). create: make an empty
// database if neither a local file nor a replica exists. exclusive: a
// database restored from the replica is reported as a conflict.
func (h *Host) open(ctx context.Context, name string, create, exclusive bool) (*database, error) {
	path := h.path(name)
	store := Sub(h.opts.Store, name)
	log := h.opts.Logger.With("db", name)
	if h.leases != nil { // the lease first: restore must see the previous holder's last upload
		release, err := h.leases.acquire(ctx, name, store)
		if err != nil {
			return nil, err
		}
		h.dropFollower(name) // the writer restores from the bucket, at least as new
		defer func() {
			h.mu.Lock()
			opened := h.dbs[name] != nil
			h.mu.Unlock()
			if !opened {
				release()
			}
		}()
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		restored, err := h.restore(ctx, store, path, log)
		switch {
		case err != nil:
			return nil, err
		case !restored && !create:
			return nil, notFound(name)
		case !restored:
			if err := createEmpty(path); err != nil {
				return nil, dberr.New(dberr.CodeInternal, "create database "+quote(name)+": "+err.Error())
			}
			log.Info("created database", "path", path)
		case exclusive:
			if _, err := h.start(ctx, name, path, store, log); err != nil {
				return nil, err
			}
			return nil, dberr.New(dberr.CodeExists, "database "+quote(name)+" already exists in the replica; it was restored")
		}
	}
	return h.start(ctx, name, path, store, log)
}

// restore restores path from store; restored=false if the replica is empty.
func (h *Host) restore(ctx context.Context, store replica.Store, path string, log *slog.Logger) (bool, error) {
	start := time.Now()
	err := h.opts.Replication.Restore(ctx, store, path)
	if h.opts.Replication.noReplica(err) {
		return false, nil
	}
	if err != nil {
		return false, dberr.New(dberr.CodeUnavailable, fmt.Sprintf("restore of %s from %s failed: %v; check the replica and retry", filepath.Base(path), store, err))
	}
	log.Info("restored database from replica", "replica", store.String(), "took", time.Since(start))
	return true, nil
}

// createEmpty creates a WAL-mode database with its first page written, so
// the engine has something to snapshot.
func createEmpty(path string) error {
	c, err := sqlconn.Open(path, sqlconn.OwnWriter, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run("PRAGMA user_version=0")
}

// start opens the replicator and connections; on a diverged local file
// (sync mode: the bucket is the truth) it moves the file aside and restores.
func (h *Host) start(ctx context.Context, name, path string, store replica.Store, log *slog.Logger) (*database, error) {
	release, err := h.reserveSlot(ctx, name)
	if err != nil {
		return nil, err
	}
	defer release() // after the database is in the table (or failed)
	db := &database{name: name, path: path, opts: &h.opts, log: log, store: store,
		sessions: map[*session]struct{}{}, host: h}
	db.touch()
	var notify func(replica.LTXFile)
	onShip := func(f replica.LTXFile) {
		if h.opts.Observer != nil {
			h.opts.Observer.Shipped(name, f)
		}
		if notify != nil {
			notify(f)
		}
	}
	requireMatch := h.opts.Durability == Sync
	rep, err := h.opts.Replication.Open(ctx, path, store, requireMatch, onShip)
	if h.opts.Replication.diverged(err) {
		aside := fmt.Sprintf("%s.diverged-%d", path, time.Now().Unix())
		log.Warn("local database differs from its replica; moving it aside and restoring the replica (the bucket is the truth in sync mode)",
			"aside", aside, "err", err)
		for _, suffix := range localFileSuffixes {
			if rerr := os.Rename(path+suffix, aside+suffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return nil, dberr.New(dberr.CodeInternal, "move diverged database aside: "+rerr.Error())
			}
		}
		if _, rerr := h.restore(ctx, store, path, log); rerr != nil {
			return nil, rerr
		}
		rep, err = h.opts.Replication.Open(ctx, path, store, requireMatch, onShip)
	}
	if err != nil {
		if h.opts.Replication.fenced(err) {
			return nil, dberr.New(dberr.CodeUnavailable, "database "+quote(name)+": another writer owns its replica (fenced): "+err.Error())
		}
		return nil, dberr.New(dberr.CodeUnavailable, "database "+quote(name)+": start replication to "+store.String()+": "+err.Error())
	}
	if h.leases != nil {
		rep = h.leases.wrap(name, store, rep)
	}
	db.rep = rep
	if err := db.openConns(); err != nil {
		rep.Close(ctx)
		return nil, dberr.New(dberr.CodeInternal, "database "+quote(name)+": "+err.Error())
	}
	if h.opts.Replication.Compact != nil {
		notify, db.compactStop = h.opts.Replication.Compact(store, name)
	}
	db.writeCh = make(chan *writeReq, 4*h.opts.MaxGroupRequests)
	db.shipCh = make(chan *group, 1024)
	db.done = make(chan struct{})
	go db.runWriter()
	go db.runShipper()
	h.mu.Lock()
	h.dbs[name] = db
	h.mu.Unlock()
	log.Info("opened database", "txid", uint64(rep.Pos().TXID), "durability", h.opts.Durability.String())
	return db, nil
}

func (db *database) openConns() error {
	w, err := sqlconn.Open(db.path, sqlconn.SharedWriter, db.opts.StatementTimeout)
	if err != nil {
		return err
	}
	db.writer = w
	db.readers = make(chan *sqlconn.Handle, db.opts.ReadConns)
	for i := 0; i < db.opts.ReadConns; i++ {
		r, err := sqlconn.Open(db.path, sqlconn.SharedReader, db.opts.StatementTimeout)
		if err != nil {
			w.Close()
			close(db.readers)
			for c := range db.readers {
				c.Close()
			}
			return err
		}
		db.readers <- r
	}
	return nil
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

// List lists the local databases (files in DataDir) with their positions,
// and the databases that exist only in the replica (Local false). A replica
// that cannot be listed fails the listing: an answer missing databases
// would look complete.
func (h *Host) List(ctx context.Context) ([]Info, error) {
	entries, err := os.ReadDir(h.opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", h.opts.DataDir, err)
	}
	var out []Info
	local := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".db")
		if !ok || e.IsDir() || ValidateName(name) != nil {
			continue
		}
		local[name] = true
		out = append(out, h.localInfo(name))
	}
	remote, err := h.replicaNames(ctx)
	if err != nil {
		return nil, dberr.New(dberr.CodeUnavailable, "list the databases in the replica "+h.opts.Store.String()+": "+err.Error()+"; retry")
	}
	for name := range remote {
		if !local[name] {
			out = append(out, Info{Name: name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Describe returns one local database's listing entry without listing the
// others (the answer to a create).
func (h *Host) Describe(name string) (Info, bool) {
	if ValidateName(name) != nil {
		return Info{}, false
	}
	if _, err := os.Stat(h.path(name)); err != nil {
		return Info{}, false
	}
	return h.localInfo(name), true
}

func (h *Host) localInfo(name string) Info {
	in := Info{Name: name, Local: true}
	for _, suffix := range []string{"", "-wal"} {
		if fi, err := os.Stat(h.path(name) + suffix); err == nil {
			in.SizeBytes += fi.Size()
		}
	}
	h.mu.Lock()
	db := h.dbs[name]
	h.mu.Unlock()
	if db != nil {
		st := db.stats()
		in.Open, in.TXID, in.Unshipped, in.Fenced = true, st.TXID, st.Unshipped, st.Fenced
	}
	return in
}

// Delete closes the database and removes its local files; with purge it
// also deletes its replica. Without purge, the next use restores it.
func (h *Host) Delete(ctx context.Context, name string, purge bool) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	unlock := h.lock(name)
	defer unlock()
	h.mu.Lock()
	db := h.dbs[name]
	delete(h.dbs, name)
	h.mu.Unlock()
	path := h.path(name)
	_, statErr := os.Stat(path)
	if db == nil && statErr != nil && !purge {
		return notFound(name)
	}
	if db != nil {
		db.deleting.Store(true)
		if err := db.close(ctx); err != nil {
			h.opts.Logger.Warn("closing database for delete", "db", name, "err", err)
		}
	}
	if h.leases != nil {
		h.leases.release(name)
	}
	for _, suffix := range localFileSuffixes {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return dberr.New(dberr.CodeInternal, "delete "+path+suffix+": "+err.Error())
		}
	}
	if purge {
		defer h.forgetReplicaNames()
		store := Sub(h.opts.Store, name)
		objs, err := store.List(ctx, "")
		if err == nil {
			keys := make([]string, len(objs))
			for i, o := range objs {
				keys[i] = o.Key
			}
			err = store.Delete(ctx, keys...)
		}
		if err != nil {
			return dberr.New(dberr.CodeUnavailable, "database "+quote(name)+" deleted locally but purging its replica "+store.String()+" failed: "+err.Error()+"; retry with ?purge=true")
		}
	}
	h.opts.Logger.Info("deleted database", "db", name, "purged_replica", purge)
	return nil
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
	dbs := h.dbs
	h.dbs = map[string]*database{}
	h.mu.Unlock()
	h.closeFollowers()
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
		h.leases.closeAll()
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
