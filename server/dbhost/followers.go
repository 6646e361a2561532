package dbhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicedb/sluice/follow"
	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
)

// Followers: an instance that does not hold a database's lease (or runs
// with Options.FollowOnly) keeps a read-only copy of it current with a
// follow.Follower, in its own file (<name>.follower, never the writer's
// <name>.db), and serves reads from it through a ReplicaView. Writes on a
// view are refused with a *NeedsWriterError, so the server forwards the
// request to the lease holder. Taking the lease drops the follower: the
// writer's open path restores <name>.db from the bucket, which is at least
// as new.

// FollowOptions tune followers. Zero values get the defaults in brackets.
type FollowOptions struct {
	PollInterval time.Duration // [200ms]
	BookmarkWait time.Duration // how long a read waits for its bookmark [5s]
}

type followed struct {
	name    string
	f       *follow.Follower
	readers chan *sqlconn.Handle
	stop    context.CancelFunc
	done    chan struct{}

	gate   sync.RWMutex // reads hold it shared; close takes it exclusively
	closed bool
}

type followTable struct {
	mu   sync.Mutex
	m    map[string]*followed
	open map[string]*sync.Mutex
}

func (h *Host) followPath(name string) string {
	return filepath.Join(h.opts.DataDir, name+".follower")
}

// follower returns name's follower, restoring and starting it on first use.
func (h *Host) follower(ctx context.Context, name string) (*followed, error) {
	t := h.follows
	t.mu.Lock()
	if fd := t.m[name]; fd != nil {
		t.mu.Unlock()
		return fd, nil
	}
	l := t.open[name]
	if l == nil {
		l = &sync.Mutex{}
		t.open[name] = l
	}
	t.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	t.mu.Lock()
	fd := t.m[name]
	t.mu.Unlock()
	if fd != nil {
		return fd, nil
	}
	if h.isClosed() {
		return nil, dberr.New(dberr.CodeUnavailable, "server is shutting down")
	}
	store := replica.Sub(h.opts.Store, name)
	f, err := follow.Open(ctx, h.followPath(name), store, follow.Options{
		PollInterval: h.opts.Follow.PollInterval, Logger: h.opts.Logger.With("follower", name)})
	if errors.Is(err, restore.ErrNoReplica) {
		return nil, notFound(name)
	} else if err != nil {
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+": start following its replica: "+err.Error()+"; retry")
	}
	fd = &followed{name: name, f: f, readers: make(chan *sqlconn.Handle, h.opts.ReadConns), done: make(chan struct{})}
	for i := 0; i < h.opts.ReadConns; i++ {
		c, err := openReplicaConn(f.Path(), h.opts.StatementTimeout)
		if err != nil {
			fd.closeLocked()
			return nil, dberr.ForDatabase(dberr.CodeInternal, name, "database "+quote(name)+": "+err.Error())
		}
		fd.readers <- c
	}
	runCtx, stop := context.WithCancel(context.Background())
	fd.stop = stop
	go func() { defer close(fd.done); f.Run(runCtx) }()
	t.mu.Lock()
	t.m[name] = fd
	t.mu.Unlock()
	h.opts.Logger.Info("serving reads from a follower", "db", name, "txid", uint64(f.Pos().TXID))
	return fd, nil
}

// openReplicaConn opens a read connection on a follower's copy: read-only
// and without the WAL flag (the copy stays in rollback-journal mode).
func openReplicaConn(path string, timeout time.Duration) (*sqlconn.Handle, error) {
	c, err := sqliteconn.Open(path, sqlite.OpenReadOnly|sqlite.OpenNoMutex)
	if err != nil {
		return nil, fmt.Errorf("open follower copy %s: %w", path, err)
	}
	c.SetBusyTimeout(10 * time.Second) // the follower holds its lock for milliseconds per file
	cn, err := sqlconn.Wrap(c, sqlconn.SharedReader, timeout)
	if err != nil {
		return nil, fmt.Errorf("open follower copy %s: %w", path, err)
	}
	return cn, nil
}

// closeLocked stops the follower and closes its connections, then its file
// (connections first: see follow.Follower.Close).
func (fd *followed) closeLocked() {
	fd.gate.Lock()
	fd.closed = true
	fd.gate.Unlock()
	if fd.stop != nil {
		fd.stop()
		<-fd.done
	}
	close(fd.readers)
	for c := range fd.readers {
		c.Close()
	}
	fd.f.Close()
}

// dropFollower stops name's follower and removes its files (this instance
// is about to write name, or is closing).
func (h *Host) dropFollower(name string) {
	t := h.follows
	t.mu.Lock()
	fd := t.m[name]
	delete(t.m, name)
	t.mu.Unlock()
	if fd == nil {
		return
	}
	fd.closeLocked()
	for _, suffix := range []string{"", "-journal"} {
		_ = os.Remove(h.followPath(name) + suffix)
	}
	h.opts.Logger.Info("stopped following", "db", name)
}

func (h *Host) closeFollowers() {
	h.follows.mu.Lock()
	names := make([]string, 0, len(h.follows.m))
	for n := range h.follows.m {
		names = append(names, n)
	}
	h.follows.mu.Unlock()
	for _, n := range names {
		h.dropFollower(n)
	}
}

// followOnlyLeader is Get's answer in FollowOnly mode: the current lease
// holder, for the server to forward writes to.
func (h *Host) followOnlyLeader(ctx context.Context, name string) error {
	rec, _, _ := lease.Read(ctx, replica.Sub(h.opts.Store, name))
	return &NotLeaderError{Name: name, Leader: rec}
}

// FollowerStats describe one follower, for /metrics.
type FollowerStats struct {
	Name string
	follow.Stats
}

// FollowerStats returns every running follower's lag.
func (h *Host) FollowerStats() []FollowerStats {
	h.follows.mu.Lock()
	defer h.follows.mu.Unlock()
	out := make([]FollowerStats, 0, len(h.follows.m))
	for n, fd := range h.follows.m {
		out = append(out, FollowerStats{Name: n, Stats: fd.f.Stats()})
	}
	return out
}

// ReplicaView is a read-only Database served from this instance's
// follower. Its Write and Session fail with a *NeedsWriterError: the server
// decides before a request runs whether it reads only (StatementsReadOnly),
// and a request that needs the writer after all is sent there.
type ReplicaView struct {
	fd *followed
}

// NeedsWriterError is what a ReplicaView answers a write or a session: the
// request belongs to the database's writer. It unwraps to the error a
// client would see if it were answered as it is.
type NeedsWriterError struct{ Name string }

func (e *NeedsWriterError) Error() string { return e.Unwrap().Error() }

func (e *NeedsWriterError) Unwrap() error {
	return dberr.ForDatabase(dberr.CodeNotLeader, e.Name, "database "+quote(e.Name)+": this instance is a read replica; writes go to the lease holder; retry")
}

// IsNeedsWriter reports whether err says that the request needs the writer.
func IsNeedsWriter(err error) bool {
	var nw *NeedsWriterError
	return errors.As(err, &nw)
}

// ReadReplica returns a view of name's follower (started on first use) once
// it has applied bookmark (0: no wait). A follower that does not reach the
// bookmark within FollowOptions.BookmarkWait is a retryable LAGGING error.
func (h *Host) ReadReplica(ctx context.Context, name string, bookmark Bookmark) (*ReplicaView, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	fd, err := h.follower(ctx, name)
	if err != nil {
		return nil, err
	}
	if bookmark > 0 {
		wait := h.opts.Follow.BookmarkWait
		if wait <= 0 {
			wait = 5 * time.Second
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := fd.f.WaitFor(wctx, ltx.TXID(bookmark))
		cancel()
		if err != nil {
			return nil, dberr.ForDatabase(dberr.CodeLagging, name, fmt.Sprintf(
				"database %s: this replica has applied TXID %d, the request's bookmark is %d and was not reached within %s; retry",
				quote(name), uint64(fd.f.Pos().TXID), uint64(bookmark), wait))
		}
	}
	return &ReplicaView{fd: fd}, nil
}

func (v *ReplicaView) Name() string { return v.fd.name }

// Bookmark is the follower's applied TXID.
func (v *ReplicaView) Bookmark() Bookmark { return Bookmark(v.fd.f.Pos().TXID) }

func (v *ReplicaView) Read(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	fd := v.fd
	fd.gate.RLock()
	defer fd.gate.RUnlock()
	if fd.closed {
		return 0, dberr.ForDatabase(dberr.CodeUnavailable, fd.name, "database "+quote(fd.name)+": this replica stopped following (it is taking the write role or shutting down); retry")
	}
	var c *sqlconn.Handle
	select {
	case c = <-fd.readers:
	case <-ctx.Done():
		return 0, sqlconn.Translate(ctx.Err())
	}
	defer func() { fd.readers <- c }()
	bm := v.Bookmark() // applied before the read began, so the read sees at least this
	err := c.Call(fn)
	if !c.Autocommit() {
		_ = c.Run("ROLLBACK")
	}
	return bm, err
}

func (v *ReplicaView) Write(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	return 0, &NeedsWriterError{Name: v.fd.name}
}

func (v *ReplicaView) Session(ctx context.Context) (Session, error) {
	return nil, &NeedsWriterError{Name: v.fd.name}
}
