package followers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/follow"
	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
)

// followed is one database's copy: its follower and read connections.
type followed struct {
	name    string
	f       *follow.Follower
	readers chan *sqlconn.Handle
	stop    context.CancelFunc
	done    chan struct{}

	gate   sync.RWMutex // reads hold it shared; close takes it exclusively
	closed bool

	// acked is the newest TXID the writer acknowledged to a request this
	// instance forwarded: what a client that wrote through this instance
	// expects to read back.
	acked atomic.Uint64
}

// startFollower restores name's copy at path from store and starts keeping
// it current.
func startFollower(ctx context.Context, name, path string, store replica.Store, opts Options) (*followed, error) {
	fo := follow.Options{PollInterval: opts.PollInterval, Logger: opts.Logger.With("follower", name)}
	if opts.OnApplied != nil {
		fo.OnApplied = func(f replica.LTXFile, body []byte) { opts.OnApplied(name, f, body) }
	}
	if d := opts.Damage; d != nil {
		since := time.Time{}
		fo.OnDamage = func(de *replica.DamageError) { since = time.Now(); d.Damaged(name, de) }
		fo.OnRecovered = func() { d.Healed(name, "", time.Since(since)) }
	}
	f, err := follow.Open(ctx, path, store, fo)
	if errors.Is(err, restore.ErrNoReplica) {
		return nil, dbhost.NotFound(name)
	} else if err != nil {
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, name, "database "+quote(name)+": start following its replica: "+err.Error()+"; retry")
	}
	fd := &followed{name: name, f: f, readers: make(chan *sqlconn.Handle, opts.ReadConns), done: make(chan struct{})}
	for i := 0; i < opts.ReadConns; i++ {
		c, err := openConn(f.Path(), opts.StatementTimeout)
		if err != nil {
			fd.close()
			return nil, dberr.ForDatabase(dberr.CodeInternal, name, "database "+quote(name)+": "+err.Error())
		}
		fd.readers <- c
	}
	runCtx, stop := context.WithCancel(context.Background())
	fd.stop = stop
	go func() { defer close(fd.done); f.Run(runCtx) }()
	if opts.Subscribe != nil {
		go opts.Subscribe(runCtx, name, f.Wake)
	}
	return fd, nil
}

// openConn opens a read connection on a copy: read-only and without the
// WAL flag (the copy stays in rollback-journal mode).
func openConn(path string, timeout time.Duration) (*sqlconn.Handle, error) {
	c, err := sqliteconn.Open(path, sqlite.OpenReadOnly)
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

// waitFor waits up to wait for the copy to apply bookmark.
func (fd *followed) waitFor(ctx context.Context, bookmark dbhost.Bookmark, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := fd.f.WaitFor(wctx, ltx.TXID(bookmark)); err != nil {
		return dberr.ForDatabase(dberr.CodeLagging, fd.name, fmt.Sprintf(
			"database %s: this replica has applied TXID %d, the request's bookmark is %d and was not reached within %s; retry",
			quote(fd.name), uint64(fd.f.Pos().TXID), uint64(bookmark), wait))
	}
	return nil
}

// close stops the follower and closes its connections, then its file
// (connections first: see follow.Follower.Close).
func (fd *followed) close() {
	fd.stopReading()
	fd.f.Close()
}

// closeInto is close that moves the copy to dst (follow.Follower.CloseInto).
func (fd *followed) closeInto(dst string) error {
	fd.stopReading()
	return fd.f.CloseInto(dst)
}

// stopReading waits for the reads in progress, stops the follower and
// closes the read connections.
func (fd *followed) stopReading() {
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
}

// quote quotes a name for a message, cut short if long (as dbhost does).
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}
