package sqlconn

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/internal/sqlitestmt"
	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
)

// Handle is one open SQLite connection with sluice's settings, statement
// guard, interrupter and statement cache. It implements Conn; the pool that
// owns it (dbhost) also runs its own statements through Run and RunTxControl.
type Handle struct {
	c        *sqlite.Conn
	in       sqlitestmt.Inspector
	g        *guard
	timeout  time.Duration // per-statement time limit
	readOnly bool
	cached   map[string]bool // statements zombiezen caches on this connection
	intr     *interrupter
	wrote    bool // the last Exec ran a statement SQLite does not call read-only
	// savepoint: a statement run since TookSavepoint last asked opened,
	// released or rolled back to a savepoint.
	savepoint bool
	row       Row // handed to a Stmt's RowWriter; its scratch buffer is reused
}

// maxCachedStmts bounds the per-connection statement cache: clients that
// inline values into SQL would otherwise grow it without limit.
const maxCachedStmts = 256

// Role says who uses a connection, which decides what the guard allows.
type Role int

// The four roles a connection plays.
const (
	SharedWriter Role = iota // the group writer: requests share its transaction
	SharedReader             // a pooled read connection (query_only)
	OwnWriter                // a session of a read-write client
	OwnReader                // a session of a read-only client (query_only)
)

func (r Role) readOnly() bool { return r == SharedReader || r == OwnReader }

// Open opens one connection to path with sluice's settings: WAL, the
// guard authorizer, extension loading off (SQLite's default, kept), and
// query_only for readers.
func Open(path string, role Role, timeout time.Duration) (*Handle, error) {
	c, err := sqliteconn.Open(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Writers wait for the capture engine's millisecond-long checkpoint lock
	// and for interactive sessions; readers never wait in WAL mode.
	c.SetBusyTimeout(30 * time.Second)
	pragmas := []string{
		"PRAGMA synchronous=NORMAL",   // durability comes from the bucket, not fsync
		"PRAGMA wal_autocheckpoint=0", // the engine checkpoints after shipping
	}
	cn, err := newConn(c, role, timeout, pragmas...)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return cn, nil
}

// Wrap applies the role's settings to c, an open connection, and installs
// the guard; on failure it closes c.
func Wrap(c *sqlite.Conn, role Role, timeout time.Duration) (*Handle, error) {
	return newConn(c, role, timeout)
}

// newConn applies pragmas and the role's settings to c and installs the
// guard; on failure it closes c.
func newConn(c *sqlite.Conn, role Role, timeout time.Duration, pragmas ...string) (*Handle, error) {
	pragmas = append(pragmas, "PRAGMA foreign_keys=ON") // sharedDefaults records it
	if role.readOnly() {
		pragmas = append(pragmas, "PRAGMA query_only=1")
	}
	for _, p := range pragmas {
		if err := Run(c, p); err != nil {
			sqliteconn.Close(c)
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	applyLimits(c)
	g := &guard{shared: role == SharedWriter || role == SharedReader, readOnly: role.readOnly(), noTx: role == SharedWriter}
	if err := c.SetAuthorizer(g); err != nil {
		sqliteconn.Close(c)
		return nil, err
	}
	return &Handle{c: c, in: sqlitestmt.For(c), g: g, timeout: timeout, readOnly: role.readOnly(),
		cached: map[string]bool{}, intr: newInterrupter(c)}, nil
}

// Run runs query's first statement on c, with no time limit: for the
// pool's own statements (ROLLBACK, SAVEPOINT), which the guard allows.
func Run(c *sqlite.Conn, query string) error {
	st, _, err := c.PrepareTransient(query)
	if err != nil {
		return err
	}
	defer st.Finalize()
	if sqlitestmt.Empty(st) {
		return nil
	}
	for {
		row, err := st.Step()
		if err != nil || !row {
			return err
		}
	}
}

// Run runs query's first statement on the connection; see the package's Run.
func (c *Handle) Run(query string) error { return Run(c.c, query) }

// RunTxControl runs BEGIN/COMMIT/ROLLBACK for the group writer, which the
// guard refuses to the requests themselves.
func (c *Handle) RunTxControl(sql string) error {
	c.g.allowTx = true
	defer func() { c.g.allowTx = false }()
	c.intr.arm(context.Background(), 60*time.Second)
	defer c.intr.disarm()
	return Run(c.c, sql)
}

// SQLite is the underlying connection, for the pool's own bookkeeping tables.
func (c *Handle) SQLite() *sqlite.Conn { return c.c }

// Call calls fn with c, turning a panic in fn into an internal error so
// that one request cannot take down the goroutine that serves many.
func (c *Handle) Call(fn func(Conn) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = dberr.New(dberr.CodeInternal, fmt.Sprintf("panic while running request: %v", p))
		}
	}()
	return fn(c)
}

// Wrote reports whether the last Exec ran a statement SQLite does not call
// read-only.
func (c *Handle) Wrote() bool { return c.wrote }

// TookSavepoint reports whether a statement run since the last call opened,
// released or rolled back to a savepoint (whether or not it succeeded), and
// starts counting again. The group writer runs such a request inside a
// savepoint of its own, so that it cannot reach the requests before it.
func (c *Handle) TookSavepoint() bool {
	t := c.savepoint
	c.savepoint = false
	return t
}

// Close stops the interrupter and closes the connection.
func (c *Handle) Close() error {
	c.intr.stop()
	return sqliteconn.Close(c.c)
}

// Autocommit reports whether no transaction is open on the connection.
func (c *Handle) Autocommit() bool { return c.c.AutocommitEnabled() }

// ForeignKeysPending reports whether the open transaction holds foreign-key
// violations that its COMMIT would refuse (a deferred constraint not yet
// satisfied); SQLite counts them per connection, so asking costs nothing.
func (c *Handle) ForeignKeysPending() bool { return c.in.ForeignKeysPending() }

// TotalChanges is SQLite's total_changes() on the connection.
func (c *Handle) TotalChanges() int64 {
	s, err := c.c.Prepare("SELECT total_changes()")
	if err != nil {
		return 0
	}
	defer s.Reset()
	if row, err := s.Step(); err != nil || !row {
		return 0
	}
	return s.ColumnInt64(0)
}

// sqlError maps an error of the connection to a *dberr.Error, with the guard's
// reason when the guard refused the statement.
func (c *Handle) sqlError(err error, timedOut bool) error {
	if err != nil && c.g.needsOwn && sqlite.ErrCode(err) == sqlite.ResultAuth {
		return needsOwnConnection(c.g.reason)
	}
	return sqlErrorWhy(err, timedOut, c.g.reason)
}
