// Package follow keeps a read-only local copy of one database current from
// its replica: a Follower restores the replica once, then fetches the next
// TXID's LTX file by name every poll interval (no LIST on that path) and
// applies its pages to the live local file, so that SQLite connections of
// this process (or others) read a consistent, recent state.
//
// The local copy is kept in rollback-journal mode: pages are written under
// an EXCLUSIVE lock taken by a dedicated connection (apply.go explains why
// that is safe without the sqlite_dbpage virtual table).
//
// It imports replica, restore, superfly/ltx and zombiezen's SQLite; never
// engine, server or cmd.
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// Options tune a Follower. The zero value is usable.
type Options struct {
	// PollInterval: how often the next TXID's file is fetched once caught up
	// (default 200 ms).
	PollInterval time.Duration
	// CheckInterval: after this long of fetching nothing, the replica's
	// latest position is read (one LIST) to notice that the next file was
	// compacted away or the history restarted (default 5 s).
	CheckInterval time.Duration
	// BusyTimeout bounds how long applying waits for readers to finish their
	// read transactions (default 5 s).
	BusyTimeout time.Duration
	Logger      *slog.Logger
	// OnDamage learns, once, that the next file is damaged (the follower
	// then waits: the writer heals the replica with a snapshot, which the
	// follower restores); OnRecovered, that the follower moved on since.
	OnDamage    func(*replica.DamageError)
	OnRecovered func()
	// OnApplied hears every level-0 file applied (its body included),
	// before the new position is visible to Pos and WaitFor: whoever
	// serves from both (embedded replicas' syncs) never sees a position
	// whose file it has not heard of.
	OnApplied func(f replica.LTXFile, body []byte)
}

func (o Options) withDefaults() Options {
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = 5 * time.Second
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Follower keeps the database file at Path current from a replica.Store.
// Poll and Run must not be called concurrently; Pos, Stats and WaitFor may
// be called from any goroutine.
type Follower struct {
	path  string
	store replica.Store
	opts  Options
	log   *slog.Logger

	// file is the only descriptor this package opens on the database and it
	// stays open until Close: closing any descriptor of a file drops every
	// POSIX lock this process holds on it, the readers' SQLite locks included.
	file *os.File
	lock *sqlite.Conn // takes the EXCLUSIVE lock around each apply

	pageSize uint32
	commit   uint32 // database size in pages
	// leaderHeader is page 1's database header as the writer wrote it (the
	// copy changes a few of its fields: apply.go), for CloseInto.
	leaderHeader []byte
	// verified are the newest level-0 files this copy was built from, each
	// read whole and checked (Verified), oldest first, at most maxVerified.
	verified []replica.LTXFile

	mu       sync.Mutex
	pos      ltx.Pos
	advanced chan struct{} // closed and replaced whenever pos moves
	known    ltx.TXID      // highest TXID known to exist in the replica
	lastFile time.Time     // timestamp of the last applied file
	lastLag  time.Duration // apply time - that file's timestamp
	missing  time.Time     // when fetches started finding nothing (zero: last fetch found a file)
	applied  atomic.Int64  // files applied since Open
	restores atomic.Int64  // restores since Open (the first one included)
	damaged  string        // the damaged object Run last reported ("" if none); Run's own
	wake     chan struct{} // Wake: fetch now rather than at the next poll
	hint     atomic.Uint64 // highest TXID the writer said it shipped (Wake)
	hintAt   atomic.Int64  // when hint last moved (unix ns), for the debug log
	probeNow atomic.Bool   // Wake(0): something new, TXID unknown: probe
	// fetchTook is how long the file being applied took to fetch (Run's
	// goroutine only), for the debug log.
	fetchTook time.Duration
}

// ErrClosed is returned by WaitFor once the Follower is closed.
var ErrClosed = errors.New("follower closed")

// Open restores the replica's latest state to path (replacing any file
// there: the bucket is the truth) and prepares to follow it. No SQLite
// connection of this process may be open on path yet. An empty replica is
// restore.ErrNoReplica.
func Open(ctx context.Context, path string, store replica.Store, opts Options) (*Follower, error) {
	opts = opts.withDefaults()
	f := &Follower{path: path, store: store, opts: opts, log: opts.Logger.With("db", path), advanced: make(chan struct{}),
		wake: make(chan struct{}, 1)}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("follow %s: remove the stale local copy %s: %w", store, path+suffix, err)
		}
	}
	tmp, res, err := f.restoreToTemp(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("follow %s: move the restored copy into place at %s: %w", store, path, err)
	}
	if f.file, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("follow %s: open %s: %w", store, path, err)
	}
	if f.lock, err = openLockConn(path, opts.BusyTimeout); err != nil {
		f.file.Close()
		return nil, err
	}
	f.pageSize, f.commit = res.PageSize, res.Pages
	// The restored header's size field may be stale (a WAL-mode leader need
	// not rewrite page 1 on every commit): make it exact before anyone reads.
	if err := f.locked(func() error { return f.finishCommit(res.Pages) }); err != nil {
		f.Close()
		return nil, err
	}
	f.setPos(res.Pos, time.Time{})
	f.restores.Add(1)
	f.log.Info("following", "replica", store.String(), "txid", res.Pos.TXID)
	return f, nil
}

// Path is the local copy's file name: open read-only connections on it.
func (f *Follower) Path() string { return f.path }

// Pos is the position of the last applied state.
func (f *Follower) Pos() ltx.Pos {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

// Stats describe how far behind the replica the local copy is.
type Stats struct {
	TXID     ltx.TXID      // applied
	Known    ltx.TXID      // highest TXID known to exist in the replica (>= TXID)
	LagTXIDs uint64        // Known - TXID
	Lag      time.Duration // for the last applied file: applied at - written by the leader at
	Behind   time.Duration // 0 when caught up; else time since the last applied file was written
	Applied  int64         // files applied since Open
	Restores int64         // full restores since Open (1 after Open)
}

// Stats returns the current lag figures.
func (f *Follower) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{TXID: f.pos.TXID, Known: max(f.known, f.pos.TXID), Lag: f.lastLag,
		Applied: f.applied.Load(), Restores: f.restores.Load()}
	s.LagTXIDs = uint64(s.Known - s.TXID)
	if s.LagTXIDs > 0 && !f.lastFile.IsZero() {
		s.Behind = time.Since(f.lastFile)
	}
	return s
}

// Saw notes that TXID txid exists in the replica (a client's bookmark says
// so), for the lag figures.
func (f *Follower) Saw(txid ltx.TXID) {
	f.mu.Lock()
	f.known = max(f.known, txid)
	f.mu.Unlock()
}

func (f *Follower) setPos(pos ltx.Pos, fileTime time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pos = pos
	f.known = max(f.known, pos.TXID)
	if !fileTime.IsZero() {
		f.lastFile = fileTime
		f.lastLag = max(0, time.Since(fileTime))
	}
	close(f.advanced)
	f.advanced = make(chan struct{})
}

// WaitFor returns once TXID txid is applied, or ctx's error.
func (f *Follower) WaitFor(ctx context.Context, txid ltx.TXID) error {
	f.Saw(txid)
	for {
		f.mu.Lock()
		reached, ch, closed := f.pos.TXID >= txid, f.advanced, f.file == nil
		f.mu.Unlock()
		if reached {
			return nil
		}
		if closed {
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Wake makes Run fetch the next file now instead of at its next poll: the
// writer said that TXID txid is in the bucket (0: something new). It is
// only a hint: what is applied is still fetched from the bucket by name and
// checked, so a wrong or early hint costs a few fetches and changes
// nothing; the files up to txid are fetched concurrently.
func (f *Follower) Wake(txid uint64) {
	if txid == 0 {
		f.probeNow.Store(true)
	}
	for {
		cur := f.hint.Load()
		if txid <= cur {
			break
		}
		if f.hint.CompareAndSwap(cur, txid) {
			f.hintAt.Store(time.Now().UnixNano())
			break
		}
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run polls until ctx ends. Errors are logged and retried at the next poll:
// a follower outlives an unreachable bucket. Woken by the writer's push, it
// fetches what the push named and no further: probing for the TXID after
// it would be a request the bucket answers "not yet", which would hold up
// the next push by a GET's time; the poll interval still probes.
func (f *Follower) Run(ctx context.Context) {
	t := time.NewTicker(f.opts.PollInterval)
	defer t.Stop()
	probe := true
	for {
		n, err := f.poll(ctx, probe)
		var de *replica.DamageError
		switch {
		case errors.As(err, &de) && ctx.Err() == nil:
			if f.damaged != de.Key {
				f.damaged = de.Key
				f.log.Error("replica object damaged: this follower waits for the writer to heal the replica with a snapshot",
					"replica", f.store.String(), "key", de.Key, "damage", de.What, "err", de.Err)
				if f.opts.OnDamage != nil {
					f.opts.OnDamage(de)
				}
			}
		case err != nil && ctx.Err() == nil:
			f.log.Warn("following the replica failed; retrying at the next poll", "replica", f.store.String(), "err", err)
		case n > 0 && f.damaged != "":
			f.log.Info("following again past the damaged object", "replica", f.store.String(), "key", f.damaged, "txid", f.Pos().TXID.String())
			f.damaged = ""
			if f.opts.OnRecovered != nil {
				f.opts.OnRecovered()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			probe = true
		case <-f.wake:
			probe = f.probeNow.Swap(false)
		}
	}
}

// Poll applies every next file the replica has, then, if nothing new was
// found for CheckInterval, compares with the replica's latest position and
// restores again if the next file is gone (compacted away) or the history
// changed. It returns the number of files applied.
func (f *Follower) Poll(ctx context.Context) (int, error) { return f.poll(ctx, true) }

// poll is Poll; without probe, only the files the writer said it shipped
// are fetched (see Run).
func (f *Follower) poll(ctx context.Context, probe bool) (int, error) {
	n, err := f.applyAvailable(ctx, probe)
	if err != nil {
		return n, err
	}
	f.mu.Lock()
	if n > 0 || f.missing.IsZero() {
		f.missing = time.Now()
	}
	slow := time.Since(f.missing) >= f.opts.CheckInterval
	if slow {
		f.missing = time.Now()
	}
	f.mu.Unlock()
	if !slow {
		return n, nil
	}
	latest, err := replica.LatestPos(ctx, f.store)
	if err != nil {
		return n, fmt.Errorf("follow %s: read the replica's latest position: %w", f.store, err)
	}
	f.Saw(latest.TXID)
	if latest.TXID == f.Pos().TXID {
		return n, nil
	}
	// The next file may have landed since the last fetch: only one still
	// missing now that a later TXID is known means it was compacted away.
	if m, err := f.applyAvailable(ctx, true); err != nil || m > 0 {
		return n + m, err
	}
	cur := f.Pos().TXID
	f.log.Info("the next transaction file is missing but the replica moved on (compacted, or a new history): restoring again",
		"local_txid", cur, "replica_txid", latest.TXID)
	if err := f.rerestore(ctx); err != nil {
		return n, err
	}
	return n + 1, nil
}

// applyAvailable applies next files: those the writer said it shipped,
// several fetched at once, then (probe) the next one after them, and again
// until one is missing. A file found by probing never leaves the rest to
// probing one GET at a time: the pushes that arrived meanwhile are fetched
// at once again.
func (f *Follower) applyAvailable(ctx context.Context, probe bool) (int, error) {
	n := 0
	for {
		m, err := f.applyHinted(ctx)
		n += m
		if err != nil {
			return n, err
		}
		if m > 0 && f.Pos().TXID < ltx.TXID(f.hint.Load()) {
			continue // more were pushed meanwhile
		}
		if !probe {
			return n, nil
		}
		ok, err := f.applyNext(ctx)
		if err != nil || !ok {
			return n, err
		}
		n++
	}
}

// Close closes the dedicated connection and the file descriptor. Close
// every other SQLite connection of this process on Path first (see file).
func (f *Follower) Close() error {
	f.mu.Lock()
	file, lock := f.file, f.lock
	f.file, f.lock = nil, nil
	close(f.advanced) // wake waiters: they see file == nil
	f.advanced = make(chan struct{})
	f.mu.Unlock()
	var err error
	if lock != nil {
		err = sqliteconn.Close(lock)
	}
	if file != nil {
		err = errors.Join(err, file.Close())
	}
	return err
}

// restoreToTemp restores the replica's latest state beside path, in
// rollback-journal mode, and returns the temp file's name.
func (f *Follower) restoreToTemp(ctx context.Context) (string, restore.Result, error) {
	tmp, err := os.CreateTemp(dirOf(f.path), "."+baseOf(f.path)+".follow-*.tmp")
	if err != nil {
		return "", restore.Result{}, fmt.Errorf("follow %s: create a temp file beside %s: %w", f.store, f.path, err)
	}
	tmpPath := tmp.Name()
	tmp.Close()
	os.Remove(tmpPath) // restore creates its output itself
	res, err := restore.Restore(ctx, f.store, tmpPath, restore.Options{Logger: f.opts.Logger})
	if err != nil {
		return "", res, fmt.Errorf("follow %s: restore into %s: %w", f.store, f.path, err)
	}
	hdr, err := readHeader(tmpPath)
	if err == nil {
		err = setRollbackMode(tmpPath)
	}
	if err != nil {
		os.Remove(tmpPath)
		return "", res, err
	}
	f.leaderHeader = hdr
	f.verified = f.verified[:0]
	f.noteVerified(res.Files...)
	return tmpPath, res, nil
}

// maxVerified bounds Verified's list: past it, the oldest are dropped (a
// new writer then reads those again before its first acknowledgement).
const maxVerified = 4096

func (f *Follower) noteVerified(files ...replica.LTXFile) {
	for _, file := range files {
		if file.Level == 0 {
			f.verified = append(f.verified, file)
		}
	}
	// Trimmed once it holds twice the bound, not at every applied file:
	// each trim moves the list, and a busy follower applies hundreds a second.
	if n := len(f.verified) - maxVerified; n >= maxVerified {
		f.verified = append(f.verified[:0], f.verified[n:]...)
	}
}

// Verified returns the newest level-0 files the copy was built from (the
// restore's and each applied one's), each read whole and checked as a
// restore checks it: a writer opening this copy need not read them again
// (compact.Compactor.Verified). Call it only once Run has returned.
func (f *Follower) Verified() []replica.LTXFile {
	return slices.Clone(f.verified[max(0, len(f.verified)-maxVerified):])
}
