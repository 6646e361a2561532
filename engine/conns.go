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

// openConn opens one of sluice's own connections to the application's
// database. It never creates the file.
func openConn(path string) (*sqlite.Conn, error) {
	c, err := sqliteconn.Open(path, sqlite.OpenReadWrite|sqlite.OpenURI)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	c.SetBusyTimeout(busyTimeout)
	return c, nil
}

// exec runs one statement, discarding rows.
func exec(ctx context.Context, c *sqlite.Conn, query string) error {
	if ctx != nil {
		c.SetInterrupt(ctx.Done())
		defer c.SetInterrupt(nil)
	}
	return sqlitex.ExecuteTransient(c, query, nil)
}

// queryInt runs a statement and returns the first column of its first row.
func queryInt(ctx context.Context, c *sqlite.Conn, query string) (int64, error) {
	if ctx != nil {
		c.SetInterrupt(ctx.Done())
		defer c.SetInterrupt(nil)
	}
	var v int64
	err := sqlitex.ExecuteTransient(c, query, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { v = s.ColumnInt64(0); return nil },
	})
	return v, err
}

// beginRead opens a read transaction and pins its WAL snapshot: a deferred
// BEGIN takes no lock until the first read.
func beginRead(ctx context.Context, c *sqlite.Conn) error {
	if err := exec(ctx, c, "BEGIN"); err != nil {
		return err
	}
	if _, err := queryInt(ctx, c, "SELECT count(*) FROM sqlite_schema"); err != nil {
		_ = exec(nil, c, "ROLLBACK")
		return err
	}
	return nil
}

// endTx ends whatever transaction c holds.
func endTx(c *sqlite.Conn) error {
	if c.AutocommitEnabled() {
		return nil
	}
	return exec(nil, c, "ROLLBACK")
}

// checkpoint runs PRAGMA wal_checkpoint(mode) and reports whether it could
// not finish (busy) and how many frames the log holds.
func checkpoint(ctx context.Context, c *sqlite.Conn, mode string) (busy bool, logFrames int64, err error) {
	if ctx != nil {
		c.SetInterrupt(ctx.Done())
		defer c.SetInterrupt(nil)
	}
	err = sqlitex.ExecuteTransient(c, "PRAGMA wal_checkpoint("+mode+")", &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error {
			busy, logFrames = s.ColumnInt(0) != 0, s.ColumnInt64(1)
			return nil
		},
	})
	return busy, logFrames, err
}

// execRows runs a statement and calls fn for each row.
func execRows(ctx context.Context, c *sqlite.Conn, query string, fn func(*sqlite.Stmt)) error {
	if ctx != nil {
		c.SetInterrupt(ctx.Done())
		defer c.SetInterrupt(nil)
	}
	return sqlitex.ExecuteTransient(c, query, &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { fn(s); return nil },
	})
}
