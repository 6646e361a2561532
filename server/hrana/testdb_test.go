package hrana

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
	"zombiezen.com/go/sqlite"
)

// testDB is a test-only dbhost.Database over a real SQLite file (zombiezen):
// one writer connection shared by Write and Session behind a semaphore, and a
// small pool of read-only connections. It has no group commit and no upload;
// the bookmark counts write callbacks and sessions.
type testDB struct {
	name    string
	writer  *sqlite.Conn
	wsem    chan struct{} // held by a Write call or an open Session
	readers chan *sqlite.Conn
	txid    atomic.Uint64
	writes  atomic.Int64 // Write calls, to observe routing
	reads   atomic.Int64
	sess    atomic.Int64
}

func openTestDB(t testing.TB, name string) *testDB {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".db")
	w, err := sqlite.OpenConn(path, sqlite.OpenReadWrite, sqlite.OpenCreate, sqlite.OpenWAL)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	mustExec(t, w, "PRAGMA journal_mode=WAL")
	w.SetBusyTimeout(5 * time.Second)
	db := &testDB{name: name, writer: w, wsem: make(chan struct{}, 1), readers: make(chan *sqlite.Conn, 4)}
	for range 4 {
		r, err := sqlite.OpenConn(path, sqlite.OpenReadOnly, sqlite.OpenWAL)
		if err != nil {
			t.Fatalf("open reader %s: %v", path, err)
		}
		r.SetBusyTimeout(5 * time.Second)
		db.readers <- r
	}
	t.Cleanup(func() {
		for range 4 {
			(<-db.readers).Close()
		}
		w.Close()
	})
	return db
}

func mustExec(t testing.TB, c *sqlite.Conn, sql string) {
	t.Helper()
	st, _, err := c.PrepareTransient(sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer st.Finalize()
	for {
		row, err := st.Step()
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if !row {
			return
		}
	}
}

func (db *testDB) Name() string { return db.name }

func (db *testDB) Read(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	db.reads.Add(1)
	var c *sqlite.Conn
	select {
	case c = <-db.readers:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { db.readers <- c }()
	return dbhost.Bookmark(db.txid.Load()), fn(&testConn{c: c})
}

func (db *testDB) lock(ctx context.Context) error {
	select {
	case db.wsem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (db *testDB) Write(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	db.writes.Add(1)
	if err := db.lock(ctx); err != nil {
		return 0, err
	}
	defer func() { <-db.wsem }()
	c := &testConn{c: db.writer}
	run := func(sql string) error { _, err := c.Exec(ctx, sqlconn.Stmt{SQL: sql}); return err }
	if err := run("BEGIN IMMEDIATE"); err != nil {
		return 0, err
	}
	if err := run("SAVEPOINT request"); err != nil {
		_ = run("ROLLBACK")
		return 0, err
	}
	fnErr := fn(c)
	if fnErr != nil {
		_ = run("ROLLBACK TO request")
	}
	_ = run("RELEASE request")
	if err := run("COMMIT"); err != nil {
		_ = run("ROLLBACK")
		return 0, err
	}
	bm := dbhost.Bookmark(db.txid.Add(1))
	return bm, fnErr
}

func (db *testDB) Session(ctx context.Context) (dbhost.Session, error) {
	if err := db.lock(ctx); err != nil {
		return nil, err
	}
	db.sess.Add(1)
	return &testSession{testConn: testConn{c: db.writer}, db: db}, nil
}

type testSession struct {
	testConn
	db     *testDB
	closed bool
}

func (s *testSession) Close(ctx context.Context) (dbhost.Bookmark, error) {
	if s.closed {
		return 0, errors.New("session closed twice")
	}
	s.closed = true
	if !s.c.AutocommitEnabled() {
		_, _ = s.Exec(ctx, sqlconn.Stmt{SQL: "ROLLBACK"})
	}
	bm := dbhost.Bookmark(s.db.txid.Add(1))
	<-s.db.wsem
	return bm, nil
}

// StateChanged: the test database has no connection state of its own.
func (s *testSession) StateChanged() bool { return false }

type testConn struct{ c *sqlite.Conn }

func (tc *testConn) Autocommit() bool { return tc.c.AutocommitEnabled() }

func convertErr(err error) error {
	if err == nil {
		return nil
	}
	code := sqlite.ErrCode(err)
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "sqlite") {
		msg = msg[i+2:]
	}
	return &dberr.Error{Code: code.String(), Message: msg}
}

func (tc *testConn) prepare(ctx context.Context, sql string) (*sqlite.Stmt, error) {
	st, trailing, err := tc.c.PrepareTransient(sql)
	if err != nil {
		return nil, convertErr(err)
	}
	if trailing > 0 && sqltext.SkipBlanks(sql[len(sql)-trailing:], 0) < trailing {
		st.Finalize()
		return nil, dberr.New(dberr.CodeSQLiteError, "only one statement per request is allowed")
	}
	return st, nil
}

func (tc *testConn) Exec(ctx context.Context, s sqlconn.Stmt) (sqlconn.Result, error) {
	start := time.Now()
	tc.c.SetInterrupt(ctx.Done())
	defer tc.c.SetInterrupt(nil)
	st, err := tc.prepare(ctx, s.SQL)
	if err != nil {
		return sqlconn.Result{}, err
	}
	defer st.Finalize()
	for i, v := range s.Args {
		bind(st, i+1, v)
	}
	for name, v := range s.NamedArgs {
		idx := 0
		for i := 1; i <= st.BindParamCount(); i++ {
			if st.BindParamName(i) == name {
				idx = i
			}
		}
		if idx == 0 {
			return sqlconn.Result{}, &dberr.Error{Code: "SQLITE_RANGE", Message: fmt.Sprintf("no parameter named %s", name)}
		}
		bind(st, idx, v)
	}
	var res sqlconn.Result
	for i := range st.ColumnCount() {
		res.Columns = append(res.Columns, sqlconn.Column{Name: st.ColumnName(i), DeclType: declType(tc.c, st, i)})
	}
	for {
		row, err := st.Step()
		if err != nil {
			return sqlconn.Result{}, convertErr(err)
		}
		if !row {
			break
		}
		res.RowsRead++
		if !s.WantRows {
			continue
		}
		vals := make([]sqlconn.Value, st.ColumnCount())
		for i := range vals {
			switch st.ColumnType(i) {
			case sqlite.TypeInteger:
				vals[i] = sqlconn.Value{Type: sqlconn.Integer, Int: st.ColumnInt64(i)}
			case sqlite.TypeFloat:
				vals[i] = sqlconn.Value{Type: sqlconn.Float, Float: st.ColumnFloat(i)}
			case sqlite.TypeText:
				vals[i] = sqlconn.Value{Type: sqlconn.Text, Text: st.ColumnText(i)}
			case sqlite.TypeBlob:
				b := make([]byte, st.ColumnLen(i))
				st.ColumnBytes(i, b)
				vals[i] = sqlconn.Value{Type: sqlconn.Blob, Blob: b}
			}
		}
		res.Rows = append(res.Rows, vals)
	}
	res.Changes = int64(tc.c.Changes())
	res.LastInsertRowID = tc.c.LastInsertRowID()
	res.Duration = time.Since(start)
	return res, nil
}

func bind(st *sqlite.Stmt, i int, v sqlconn.Value) {
	switch v.Type {
	case sqlconn.Integer:
		st.BindInt64(i, v.Int)
	case sqlconn.Float:
		st.BindFloat(i, v.Float)
	case sqlconn.Text:
		st.BindText(i, v.Text)
	case sqlconn.Blob:
		st.BindBytes(i, v.Blob)
	default:
		st.BindNull(i)
	}
}

// declType approximates sqlite3_column_decltype (which zombiezen does not
// expose) from the column's table and name; enough for unaliased columns.
func declType(c *sqlite.Conn, st *sqlite.Stmt, i int) string {
	table := st.ColumnTableName(i)
	if table == "" {
		return ""
	}
	q, _, err := c.PrepareTransient("SELECT type FROM pragma_table_xinfo(?) WHERE name = ?")
	if err != nil {
		return ""
	}
	defer q.Finalize()
	q.BindText(1, table)
	q.BindText(2, st.ColumnName(i))
	if row, _ := q.Step(); row {
		return q.ColumnText(0)
	}
	return ""
}

func (tc *testConn) Describe(ctx context.Context, sql string) (sqlconn.Description, error) {
	st, err := tc.prepare(ctx, sql)
	if err != nil {
		return sqlconn.Description{}, err
	}
	defer st.Finalize()
	var d sqlconn.Description
	for i := 1; i <= st.BindParamCount(); i++ {
		d.Params = append(d.Params, st.BindParamName(i))
	}
	for i := range st.ColumnCount() {
		d.Columns = append(d.Columns, sqlconn.Column{Name: st.ColumnName(i), DeclType: declType(tc.c, st, i)})
	}
	words := sqltext.LeadingWords(sql, 2)
	if len(words) > 0 {
		switch words[0] {
		case "SELECT", "VALUES", "EXPLAIN":
			d.ReadOnly = true
		case "PRAGMA":
			d.ReadOnly = !strings.Contains(sql, "=")
		}
		d.Explain = words[0] == "EXPLAIN"
	}
	return d, nil
}
