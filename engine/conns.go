package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// busyTimeout bounds how long sluice waits for the application's locks (WAL
// recovery, a running write transaction before a checkpoint).
const busyTimeout = 5 * time.Second

// conn is one of sluice's own connections to the application's database.
// Its interrupt channel is installed once: zombiezen's SetInterrupt starts a
// goroutine per call and waits for it on the next, which on every sync cost
// more scheduling delay than the statements themselves. A context is
// watched with context.AfterFunc instead; only after one fired is a fresh
// channel installed. One goroutine uses a conn at a time (the DB's lock).
type conn struct {
	*sqlite.Conn
	interrupt chan struct{} // installed with SetInterrupt; closed to interrupt
}

// openConn opens one of sluice's own connections to the application's
// database. It never creates the file.
func openConn(path string) (*conn, error) {
	c, err := sqliteconn.Open(path, sqlite.OpenReadWrite|sqlite.OpenURI)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	c.SetBusyTimeout(busyTimeout)
	oc := &conn{Conn: c, interrupt: make(chan struct{})}
	c.SetInterrupt(oc.interrupt)
	return oc, nil
}

// watch interrupts c's statements when ctx ends, until the returned func is
// called (a nil ctx is never cancelled).
func (c *conn) watch(ctx context.Context) (unwatch func()) {
	if ctx == nil || ctx.Done() == nil {
		return func() {}
	}
	ch := c.interrupt
	stop := context.AfterFunc(ctx, func() { close(ch) })
	return func() {
		if stop() {
			return
		}
		// The context ended: wait for the channel to be closed, then install a
		// fresh one (SetInterrupt waits until zombiezen's watcher delivered
		// the interrupt, so it cannot hit the next statement).
		<-ch
		c.interrupt = make(chan struct{})
		c.SetInterrupt(c.interrupt)
	}
}

// exec runs one statement, discarding rows. Statements on sluice's own
// connections are a few fixed strings, so they are prepared once and kept
// (a reread of the schema per sync otherwise).
func exec(ctx context.Context, c *conn, query string) error {
	defer c.watch(ctx)()
	return sqlitex.Execute(c.Conn, query, nil)
}

// queryInt runs a statement and returns the first column of its first row.
func queryInt(ctx context.Context, c *conn, query string) (int64, error) {
	defer c.watch(ctx)()
	var v int64
	err := sqlitex.Execute(c.Conn, query, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { v = s.ColumnInt64(0); return nil },
	})
	return v, err
}

// beginRead opens a read transaction and pins its WAL snapshot: a deferred
// BEGIN takes no lock until the first read.
func beginRead(ctx context.Context, c *conn) error {
	if err := exec(ctx, c, "BEGIN"); err != nil {
		return err
	}
	if _, err := queryInt(ctx, c, "SELECT count(*) FROM sqlite_schema"); err != nil {
		_ = exec(context.Background(), c, "ROLLBACK") // even when ctx ended: never leave the snapshot pinned
		return err
	}
	return nil
}

// endTx ends whatever transaction c holds.
func endTx(c *conn) error {
	if c.AutocommitEnabled() {
		return nil
	}
	return exec(context.Background(), c, "ROLLBACK")
}

// checkpoint runs PRAGMA wal_checkpoint(mode) and reports whether it could
// not finish (busy) and how many frames the log holds.
func checkpoint(ctx context.Context, c *conn, mode string) (busy bool, logFrames int64, err error) {
	defer c.watch(ctx)()
	err = sqlitex.ExecuteTransient(c.Conn, "PRAGMA wal_checkpoint("+mode+")", &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error {
			busy, logFrames = s.ColumnInt(0) != 0, s.ColumnInt64(1)
			return nil
		},
	})
	return busy, logFrames, err
}

// execRows runs a statement and calls fn for each row.
func execRows(ctx context.Context, c *conn, query string, fn func(*sqlite.Stmt)) error {
	defer c.watch(ctx)()
	return sqlitex.ExecuteTransient(c.Conn, query, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { fn(s); return nil },
	})
}
