package dbhost

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/internal/sqlitestmt"
	"github.com/sluicedb/sluice/internal/sqltext"
	"zombiezen.com/go/sqlite"
)

// conn implements Conn over one zombiezen connection.
type conn struct {
	c        *sqlite.Conn
	in       sqlitestmt.Inspector
	g        *guard
	timeout  time.Duration // per-statement time limit
	readOnly bool
	cached   map[string]bool // statements zombiezen caches on this connection
	intr     *interrupter
	wrote    bool // the last Exec ran a statement SQLite does not call read-only
	row      Row  // handed to a Stmt's RowWriter; its scratch buffer is reused
}

// maxCachedStmts bounds the per-connection statement cache: clients that
// inline values into SQL would otherwise grow it without limit.
const maxCachedStmts = 256

// connRole says who uses a connection, which decides what the guard allows.
type connRole int

const (
	sharedWriter connRole = iota // the group writer: requests share its transaction
	sharedReader                 // a pooled read connection (query_only)
	ownWriter                    // a session of a read-write client
	ownReader                    // a session of a read-only client (query_only)
)

func (r connRole) readOnly() bool { return r == sharedReader || r == ownReader }

// openConn opens one connection to path with sluice's settings: WAL, the
// guard authorizer, extension loading off (SQLite's default, kept), and
// query_only for readers.
func openConn(path string, role connRole, timeout time.Duration) (*conn, error) {
	c, err := sqliteconn.Open(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL|sqlite.OpenNoMutex)
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

// newConn applies pragmas and the role's settings to c and installs the
// guard; on failure it closes c.
func newConn(c *sqlite.Conn, role connRole, timeout time.Duration, pragmas ...string) (*conn, error) {
	pragmas = append(pragmas, "PRAGMA foreign_keys=ON") // sharedDefaults records it
	if role.readOnly() {
		pragmas = append(pragmas, "PRAGMA query_only=1")
	}
	for _, p := range pragmas {
		if err := execSimple(c, p); err != nil {
			sqliteconn.Close(c)
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	g := &guard{shared: role == sharedWriter || role == sharedReader, readOnly: role.readOnly(), noTx: role == sharedWriter}
	if err := c.SetAuthorizer(g); err != nil {
		sqliteconn.Close(c)
		return nil, err
	}
	return &conn{c: c, in: sqlitestmt.For(c), g: g, timeout: timeout, readOnly: role.readOnly(),
		cached: map[string]bool{}, intr: newInterrupter(c)}, nil
}

func execSimple(c *sqlite.Conn, query string) error {
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

func (c *conn) close() error {
	c.intr.stop()
	return sqliteconn.Close(c.c)
}

func (c *conn) Autocommit() bool { return c.c.AutocommitEnabled() }

// Exec runs every statement in st.SQL in order and returns the last one's
// result; arguments bind to each statement. SQL that holds no statement
// (blanks, comments, semicolons) returns an empty result, as SQLite does.
func (c *conn) Exec(ctx context.Context, st Stmt) (res Result, err error) {
	if sqltext.FirstKeyword(st.SQL) == "VACUUM" {
		// VACUUM INTO writes a file anywhere; plain VACUUM rewrites the whole
		// database under the write lock. Neither belongs on a shared server.
		return Result{}, errorf(CodeForbidden, http.StatusForbidden, "statement refused: VACUUM is not available through the server")
	}
	if strings.IndexByte(st.SQL, 0) >= 0 {
		return Result{}, errNUL
	}
	c.intr.arm(ctx, c.timeout)
	c.g.reset()
	c.wrote = false
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, panicError(p)
		}
		fired := c.intr.disarm() == interruptedByDeadline
		err = c.sqlError(err, fired)
	}()
	return c.exec(st)
}

// errNUL refuses SQL with a NUL character, where SQLite would silently
// stop reading the text.
var errNUL = errorf("SQLITE_ERROR", http.StatusBadRequest, "the SQL text contains a NUL character")

// panicError reports a panic of the SQLite layer as an error: no input may
// take the process, or a lock it holds, down with it.
func panicError(p any) *Error {
	return errorf("INTERNAL", http.StatusInternalServerError, fmt.Sprintf("internal error while running the statement (%v); it was not applied", p))
}

// prepare returns sql's first statement: cached on the connection when the
// text is one statement and the cache has room, else transient (finalize
// says which). rest is the text after the first statement.
func (c *conn) prepare(sql string) (s *sqlite.Stmt, rest string, finalize bool, err error) {
	if c.cached[sql] || len(c.cached) < maxCachedStmts {
		s, err := c.c.Prepare(sql)
		if err == nil {
			if sqlitestmt.Empty(s) { // never keep a statement that cannot be reset
				s.Finalize()
				delete(c.cached, sql)
				return s, "", false, nil
			}
			c.cached[sql] = true
			return s, "", false, nil
		}
		if !strings.Contains(err.Error(), "trailing bytes") {
			return nil, "", false, err
		}
	}
	s, trailing, err := c.c.PrepareTransient(sql)
	if err != nil {
		return nil, "", false, err
	}
	return s, sql[len(sql)-trailing:], true, nil
}

func (c *conn) exec(st Stmt) (Result, error) {
	start := time.Now()
	var res Result
	rest, ran := st.SQL, false
	for !ran || !sqltext.IsBlank(rest) {
		if a, next, ok := leadingAlterColumn(rest); ok {
			if len(st.Args) > 0 || len(st.NamedArgs) > 0 {
				return Result{}, alterError("ALTER COLUMN takes no arguments")
			}
			var err error
			if res, err = c.runAlterColumn(a); err != nil {
				return Result{}, err
			}
			rest, ran = next, true
			continue
		}
		s, next, finalize, err := c.prepare(rest)
		if err != nil {
			return Result{}, err
		}
		if finalize && len(next) == len(rest) { // nothing consumed: never loop on it
			s.Finalize()
			return Result{}, errorf("SQLITE_ERROR", http.StatusBadRequest, "cannot parse the SQL text")
		}
		text := rest[:len(rest)-len(next)]
		rest, ran = next, true
		if sqlitestmt.Empty(s) {
			err := bindArgs(s, st, false) // arguments for no statement are an error
			if finalize {
				s.Finalize()
			}
			if err != nil {
				return Result{}, err
			}
			continue
		}
		res, err = c.run(s, st, text, start)
		if finalize {
			s.Finalize()
		} else {
			s.Reset()
			s.ClearBindings()
		}
		if err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (c *conn) run(s *sqlite.Stmt, st Stmt, text string, start time.Time) (Result, error) {
	if err := bindArgs(s, st, c.in.Explain(s)); err != nil {
		return Result{}, err
	}
	if !c.in.ReadOnly(s) {
		c.wrote = true
	}
	res := Result{Columns: c.columns(s)}
	n := len(res.Columns)
	kw := sqltext.FirstKeyword(text)
	var before int64
	if kw == "WITH" {
		before = c.totalChanges()
	}
	stream := st.WantRows && st.Rows != nil
	if stream {
		st.Rows.Columns(res.Columns)
		c.row.s, c.row.n = s, n
		defer func() { c.row.s = nil }()
	}
	for {
		row, err := s.Step()
		if err != nil {
			return Result{}, err
		}
		if !row {
			break
		}
		res.RowsRead++
		switch {
		case stream:
			st.Rows.Row(&c.row)
		case st.WantRows:
			res.Rows = append(res.Rows, readRow(s, n))
		}
	}
	switch kw {
	case "INSERT", "UPDATE", "DELETE", "REPLACE":
		res.Changes = int64(c.c.Changes())
	case "WITH":
		res.Changes = c.totalChanges() - before
	}
	res.RowsWritten = res.Changes
	res.LastInsertRowID = c.c.LastInsertRowID()
	res.Duration = time.Since(start)
	return res, nil
}

// columns names s's result columns as SQLite does, repeated names kept, with
// their declared types.
func (c *conn) columns(s *sqlite.Stmt) []Column {
	n := s.ColumnCount()
	if n == 0 {
		return nil
	}
	cols := make([]Column, n)
	for i := range cols {
		cols[i] = Column{Name: c.in.ColumnName(s, i), DeclType: c.in.DeclType(s, i)}
	}
	return cols
}

func (c *conn) totalChanges() int64 {
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

func readRow(s *sqlite.Stmt, n int) []Value {
	row := make([]Value, n)
	for i := range row {
		switch s.ColumnType(i) {
		case sqlite.TypeInteger:
			row[i] = Value{Type: Integer, Int: s.ColumnInt64(i)}
		case sqlite.TypeFloat:
			row[i] = Value{Type: Float, Float: s.ColumnFloat(i)}
		case sqlite.TypeText:
			row[i] = Value{Type: Text, Text: s.ColumnText(i)}
		case sqlite.TypeBlob:
			b := make([]byte, s.ColumnLen(i))
			s.ColumnBytes(i, b)
			row[i] = Value{Type: Blob, Blob: b}
		default:
			row[i] = Value{Type: Null}
		}
	}
	return row
}

func bindArgs(s *sqlite.Stmt, st Stmt, explain bool) error {
	count := s.BindParamCount()
	if st.StrictArgs && max(len(st.Args), len(st.NamedArgs)) > count {
		return argsInvalid(fmt.Sprintf("too many parameters, expected %d found %d", count, max(len(st.Args), len(st.NamedArgs))))
	}
	if len(st.Args) > count {
		return errorf(CodeBadRequest, http.StatusBadRequest,
			fmt.Sprintf("%d arguments given but the statement has %d parameters", len(st.Args), count))
	}
	for i, v := range st.Args {
		bind(s, i+1, v)
	}
	bound := len(st.Args) // parameters 1..bound have a value
	if len(st.NamedArgs) == 0 && (!st.StrictArgs || bound == count) {
		return nil
	}
	for i := 1; i <= count; i++ {
		name := s.BindParamName(i)
		if name != "" && len(st.NamedArgs) > 0 {
			v, ok := st.NamedArgs[name]
			if !ok { // accept keys given without their prefix
				v, ok = st.NamedArgs[name[1:]]
			}
			if ok {
				bind(s, i, v)
				continue
			}
		}
		// EXPLAIN only compiles the statement: sqld lets it go without values.
		if st.StrictArgs && i > bound && !explain {
			if name == "" {
				name = strconv.Itoa(i)
			}
			return argsInvalid("value for parameter " + name + " not found")
		}
	}
	return nil
}

func argsInvalid(why string) *Error {
	return errorf(CodeArgsInvalid, http.StatusBadRequest, "Arguments do not match SQL parameters: "+why)
}

func bind(s *sqlite.Stmt, i int, v Value) {
	switch v.Type {
	case Integer:
		s.BindInt64(i, v.Int)
	case Float:
		s.BindFloat(i, v.Float)
	case Text:
		s.BindText(i, v.Text)
	case Blob:
		s.BindBytes(i, v.Blob)
	default:
		s.BindNull(i)
	}
}

// Describe prepares sql without running it. ReadOnly is SQLite's own
// verdict (sqlite3_stmt_readonly) for every statement in sql, as prepared on
// this connection now; EXPLAIN counts as a read. Params and Columns describe
// the last statement, the one whose result Exec returns.
func (c *conn) Describe(ctx context.Context, sql string) (d Description, err error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return Description{}, errNUL
	}
	c.intr.arm(ctx, c.timeout)
	c.g.reset()
	defer func() {
		if p := recover(); p != nil {
			d, err = Description{}, panicError(p)
		}
		c.intr.disarm()
		err = c.sqlError(err, false)
	}()
	d.ReadOnly = true
	rest, ran := sql, false
	for !ran || !sqltext.IsBlank(rest) {
		if _, next, ok := leadingAlterColumn(rest); ok { // a write SQLite cannot prepare
			d.ReadOnly, d.Explain, d.Params, d.Columns = false, false, nil, nil
			rest, ran = next, true
			continue
		}
		s, next, finalize, err := c.prepare(rest)
		if err != nil {
			return Description{}, err
		}
		if finalize && len(next) == len(rest) {
			s.Finalize()
			return Description{}, errorf("SQLITE_ERROR", http.StatusBadRequest, "cannot parse the SQL text")
		}
		rest, ran = next, true
		if !sqlitestmt.Empty(s) {
			explain := c.in.Explain(s)
			d.ReadOnly = d.ReadOnly && (explain || c.in.ReadOnly(s))
			d.Explain, d.Params, d.Columns = explain, nil, c.columns(s)
			for i := 1; i <= s.BindParamCount(); i++ {
				d.Params = append(d.Params, s.BindParamName(i))
			}
		}
		if finalize {
			s.Finalize()
		}
	}
	return d, nil
}

// sqlError maps an error of the connection to an *Error, with the guard's
// reason when the guard refused the statement.
func (c *conn) sqlError(err error, timedOut bool) error {
	if err != nil && c.g.needsOwn && sqlite.ErrCode(err) == sqlite.ResultAuth {
		return needsOwnConnection(c.g.reason)
	}
	return sqlErrorWhy(err, timedOut, c.g.reason)
}

// IsReadOnlyError reports whether err came from a write attempted on a
// read-only connection, so the request can be retried as a write.
func IsReadOnlyError(err error) bool {
	e, ok := err.(*Error)
	return ok && strings.HasPrefix(e.Code, "SQLITE_READONLY")
}
