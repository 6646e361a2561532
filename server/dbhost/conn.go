package dbhost

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"zombiezen.com/go/sqlite"
)

// conn implements Conn over one zombiezen connection.
type conn struct {
	c        *sqlite.Conn
	g        *guard
	timeout  time.Duration // per-statement time limit
	readOnly bool
	cached   map[string]bool // statements zombiezen caches on this connection
	intr     *interrupter
	row      Row // handed to a Stmt's RowWriter; its scratch buffer is reused
}

// maxCachedStmts bounds the per-connection statement cache: clients that
// inline values into SQL would otherwise grow it without limit.
const maxCachedStmts = 256

// openConn opens one connection to path with sluice's settings: WAL, the
// guard authorizer, extension loading off (SQLite's default, kept), and
// query_only for readers.
func openConn(path string, readOnly bool, timeout time.Duration) (*conn, error) {
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
		"PRAGMA foreign_keys=ON",
	}
	if readOnly {
		pragmas = append(pragmas, "PRAGMA query_only=1")
	}
	for _, p := range pragmas {
		if err := execSimple(c, p); err != nil {
			sqliteconn.Close(c)
			return nil, fmt.Errorf("open %s: %s: %w", path, p, err)
		}
	}
	g := &guard{}
	if err := c.SetAuthorizer(g); err != nil {
		sqliteconn.Close(c)
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &conn{c: c, g: g, timeout: timeout, readOnly: readOnly, cached: map[string]bool{}, intr: newInterrupter(c)}, nil
}

func execSimple(c *sqlite.Conn, query string) error {
	st, _, err := c.PrepareTransient(query)
	if err != nil {
		return err
	}
	defer st.Finalize()
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
// result; arguments bind to each statement.
func (c *conn) Exec(ctx context.Context, st Stmt) (Result, error) {
	if strings.TrimSpace(st.SQL) == "" {
		return Result{}, errorf(CodeBadRequest, http.StatusBadRequest, "empty SQL statement")
	}
	if firstKeyword(st.SQL) == "VACUUM" {
		// VACUUM INTO writes a file anywhere; plain VACUUM rewrites the whole
		// database under the write lock. Neither belongs on a shared server.
		return Result{}, errorf(CodeForbidden, http.StatusForbidden, "statement refused: VACUUM is not available through the server")
	}
	c.intr.arm(ctx, c.timeout)
	c.g.reason = ""
	res, err := c.exec(st)
	fired := c.intr.disarm() == interruptedByDeadline
	return res, sqlErrorWhy(err, fired, c.g.reason)
}

func (c *conn) exec(st Stmt) (Result, error) {
	start := time.Now()
	// Fast path: one statement, prepared once and cached on the connection.
	if c.cached[st.SQL] || len(c.cached) < maxCachedStmts {
		s, err := c.c.Prepare(st.SQL)
		if err == nil {
			c.cached[st.SQL] = true
			res, err := c.run(s, st, st.SQL, start)
			s.Reset()
			s.ClearBindings()
			return res, err
		} else if !strings.Contains(err.Error(), "trailing bytes") {
			return Result{}, err
		}
	}
	var res Result
	rest := st.SQL
	for strings.TrimSpace(rest) != "" {
		s, trailing, err := c.c.PrepareTransient(rest)
		if err != nil {
			return Result{}, err
		}
		text := rest[:len(rest)-trailing]
		rest = rest[len(rest)-trailing:]
		if s == nil { // only a comment or ';'
			continue
		}
		res, err = c.run(s, st, text, start)
		s.Finalize()
		if err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (c *conn) run(s *sqlite.Stmt, st Stmt, text string, start time.Time) (Result, error) {
	if err := bindArgs(s, st); err != nil {
		return Result{}, err
	}
	var res Result
	n := s.ColumnCount()
	if n > 0 {
		res.Columns = make([]Column, n)
		for i := range res.Columns {
			res.Columns[i] = Column{Name: s.ColumnName(i)}
		}
	}
	kw := firstKeyword(text)
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

func bindArgs(s *sqlite.Stmt, st Stmt) error {
	count := s.BindParamCount()
	if len(st.Args) > count {
		return errorf(CodeBadRequest, http.StatusBadRequest,
			fmt.Sprintf("%d arguments given but the statement has %d parameters", len(st.Args), count))
	}
	for i, v := range st.Args {
		bind(s, i+1, v)
	}
	if len(st.NamedArgs) == 0 {
		return nil
	}
	for i := 1; i <= count; i++ {
		name := s.BindParamName(i)
		if name == "" {
			continue
		}
		v, ok := st.NamedArgs[name]
		if !ok { // accept keys given without their prefix
			v, ok = st.NamedArgs[name[1:]]
		}
		if ok {
			bind(s, i, v)
		}
	}
	return nil
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

// Describe prepares sql without running it.
func (c *conn) Describe(ctx context.Context, sql string) (Description, error) {
	c.intr.arm(ctx, c.timeout)
	defer c.intr.disarm()
	c.g.writes, c.g.reason = false, ""
	s, _, err := c.c.PrepareTransient(sql)
	if err != nil {
		return Description{}, sqlErrorWhy(err, false, c.g.reason)
	}
	if s == nil {
		return Description{ReadOnly: true}, nil
	}
	defer s.Finalize()
	d := Description{ReadOnly: !c.g.writes, Explain: firstKeyword(sql) == "EXPLAIN"}
	for i := 1; i <= s.BindParamCount(); i++ {
		d.Params = append(d.Params, s.BindParamName(i))
	}
	for i := 0; i < s.ColumnCount(); i++ {
		d.Columns = append(d.Columns, Column{Name: s.ColumnName(i)})
	}
	return d, nil
}

// firstKeyword returns the upper-cased first keyword of sql, skipping
// whitespace and comments.
func firstKeyword(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n;")
		switch {
		case strings.HasPrefix(sql, "--"):
			i := strings.IndexByte(sql, '\n')
			if i < 0 {
				return ""
			}
			sql = sql[i:]
		case strings.HasPrefix(sql, "/*"):
			i := strings.Index(sql, "*/")
			if i < 0 {
				return ""
			}
			sql = sql[i+2:]
		default:
			end := 0
			for end < len(sql) && (sql[end]|0x20 >= 'a' && sql[end]|0x20 <= 'z') {
				end++
			}
			return strings.ToUpper(sql[:end])
		}
	}
}

// IsReadStatement reports whether sql starts like a statement that only
// reads (SELECT, VALUES, EXPLAIN, WITH, PRAGMA). It is a routing hint: a
// "read" that writes fails on the read-only connection with SQLITE_READONLY
// and the caller retries it as a write.
func IsReadStatement(sql string) bool {
	switch firstKeyword(sql) {
	case "SELECT", "VALUES", "EXPLAIN", "WITH", "PRAGMA":
		return true
	}
	return false
}

// IsReadOnlyError reports whether err came from a write attempted on a
// read-only connection, so the request can be retried as a write.
func IsReadOnlyError(err error) bool {
	e, ok := err.(*Error)
	return ok && strings.HasPrefix(e.Code, "SQLITE_READONLY")
}
