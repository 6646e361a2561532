package dbhost

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/sqlconn"
	"zombiezen.com/go/sqlite"
)

func testLogger(t testing.TB) *slog.Logger { return testenv.Logger(t, slog.LevelWarn) }

func newFileStore(t testing.TB) replica.Store {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newHost(t testing.TB, store replica.Store, dir string, mod func(*Options)) *Host {
	opts := Options{DataDir: dir, Store: store, Replication: EngineReplication(testLogger(t), nil), Logger: testLogger(t)}
	if mod != nil {
		mod(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func mustExec(t testing.TB, c sqlconn.Conn, sql string, args ...sqlconn.Value) sqlconn.Result {
	t.Helper()
	res, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql, Args: args, WantRows: true})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

func write(t testing.TB, db Database, sql string, args ...sqlconn.Value) Bookmark {
	t.Helper()
	b, err := db.Write(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql, Args: args})
		return err
	})
	if err != nil {
		t.Fatalf("write %s: %v", sql, err)
	}
	return b
}

func queryInt(t testing.TB, db Database, sql string) int64 {
	t.Helper()
	var n int64
	if _, err := db.Read(context.Background(), func(c sqlconn.Conn) error {
		res, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql, WantRows: true})
		if err == nil {
			n = res.Rows[0][0].Int
		}
		return err
	}); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// restoredCount restores the replica of name into a fresh file and counts rows of t.
func restoredCount(t testing.TB, store replica.Store, name, query string) int64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, name), out, restore.Options{}); err != nil {
		t.Fatalf("restore %s: %v", name, err)
	}
	c, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.PrepareTransient(query)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Finalize()
	if row, err := st.Step(); err != nil || !row {
		t.Fatalf("%s on restored db: %v", query, err)
	}
	return st.ColumnInt64(0)
}

func TestValuesRoundTripExactly(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), nil)
	db, err := h.Create(context.Background(), "vals")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE v(i INTEGER, f REAL, s TEXT, b BLOB, n)")
	big := int64(1<<62 + 7) // beyond 2^53: would be rounded through float64
	in := []sqlconn.Value{{Type: sqlconn.Integer, Int: big}, {Type: sqlconn.Float, Float: 1.5}, {Type: sqlconn.Text, Text: "héllo\x00x"}, {Type: sqlconn.Blob, Blob: []byte{0, 1, 255}}, {Type: sqlconn.Null}}
	write(t, db, "INSERT INTO v VALUES (?,?,?,?,?)", in...)
	var got []sqlconn.Value
	if _, err := db.Read(context.Background(), func(c sqlconn.Conn) error {
		res := mustExec(t, c, "SELECT i, f, s, b, n FROM v")
		got = res.Rows[0]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if got[i].Type != in[i].Type || got[i].Int != in[i].Int || got[i].Float != in[i].Float || got[i].Text != in[i].Text || string(got[i].Blob) != string(in[i].Blob) {
			t.Errorf("column %d: got %+v, want %+v", i, got[i], in[i])
		}
	}
	// Named arguments with each prefix.
	if _, err := db.Write(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO v(i, s, b) VALUES (:a, @b, $c)",
			NamedArgs: map[string]sqlconn.Value{":a": {Type: sqlconn.Integer, Int: 2}, "@b": {Type: sqlconn.Text, Text: "x"}, "c": {Type: sqlconn.Blob, Blob: []byte("y")}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM v WHERE i = 2 AND s = 'x' AND b = x'79'"); n != 1 {
		t.Fatalf("named args row count = %d, want 1", n)
	}
}

func TestGuardRefusesFileAccess(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), nil)
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	outside := filepath.Join(t.TempDir(), "stolen.db")
	for _, sql := range []string{
		"ATTACH DATABASE '" + outside + "' AS x",
		"VACUUM INTO '" + outside + "'",
		"SELECT load_extension('/tmp/evil.so')",
		"PRAGMA journal_mode=DELETE",
		"PRAGMA temp_store_directory='/tmp'",
		"BEGIN",
		"COMMIT",
	} {
		run := func(c sqlconn.Conn) error {
			_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql})
			return err
		}
		_, werr := db.Write(context.Background(), run)
		_, rerr := db.Read(context.Background(), run)
		s, err := db.Session(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		serr := run(s)
		s.Close(context.Background())
		if werr == nil {
			t.Errorf("%s in a write group: accepted", sql)
		}
		for path, err := range map[string]error{"read": rerr, "session": serr} {
			if sql == "BEGIN" || sql == "COMMIT" {
				continue // allowed on readers and sessions
			}
			var e *dberr.Error
			if !errors.As(err, &e) || e.Code != dberr.CodeForbidden || httperr.Status(e) != 403 {
				t.Errorf("%s on a %s connection: got %v, want FORBIDDEN", sql, path, err)
			}
		}
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file outside the data directory was created: %v", err)
	}
	// The database still works and the guard left reads alone.
	write(t, db, "INSERT INTO t VALUES (1)")
	if n := queryInt(t, db, "SELECT count(*) FROM t"); n != 1 {
		t.Fatalf("count = %d", n)
	}
	if n := queryInt(t, db, "PRAGMA user_version"); n != 0 {
		t.Fatalf("user_version = %d", n)
	}
}

func TestStatementTimeoutInterrupts(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), func(o *Options) { o.StatementTimeout = 200 * time.Millisecond })
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	long := "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r"
	start := time.Now()
	_, err = db.Read(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: long})
		return err
	})
	var e *dberr.Error
	if !errors.As(err, &e) || e.Code != dberr.CodeTimeout {
		t.Fatalf("long read: got %v, want TIMEOUT", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("interrupt took %s", time.Since(start))
	}
	// A long write in a group: SQLite rolls the whole transaction back on
	// interrupt; the other requests of the group must still commit.
	d := db.(*database)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // occupies the writer so the next requests form one group
		defer wg.Done()
		db.Write(context.Background(), func(c sqlconn.Conn) error { <-release; return nil })
	}()
	for d.commits.Queued() != 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	errs := make([]error, 5)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.Write(context.Background(), func(c sqlconn.Conn) error {
				sql := "INSERT INTO t VALUES (1)"
				if i == 2 {
					sql = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) INSERT INTO t SELECT i FROM r"
				}
				_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql})
				return err
			})
		}()
	}
	for d.commits.Queued() < len(errs) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if i == 2 {
			if !errors.As(err, &e) || e.Code != dberr.CodeTimeout {
				t.Errorf("long insert: got %v, want TIMEOUT", err)
			}
		} else if err != nil {
			t.Errorf("request %d of the group: %v", i, err)
		}
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t"); n != 4 {
		t.Fatalf("rows = %d, want the 4 requests that did not time out", n)
	}
}

func TestRestartWithoutDataDirRestoresFromBucket(t *testing.T) {
	store := newFileStore(t)
	dir := t.TempDir()
	h := newHost(t, store, dir, nil)
	db, err := h.Create(context.Background(), "keep")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	write(t, db, "INSERT INTO t VALUES (42)")
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h2 := newHost(t, store, dir, nil)
	if _, err := h2.Get(context.Background(), "missing"); err == nil || httperr.Status(err) != 404 {
		t.Fatalf("unknown database: got %v, want 404", err)
	}
	db2, err := h2.Get(context.Background(), "keep")
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db2, "SELECT sum(x) FROM t"); n != 42 {
		t.Fatalf("restored sum = %d", n)
	}
	// It continues the same history.
	write(t, db2, "INSERT INTO t VALUES (1)")
	if got := restoredCount(t, store, "keep", "SELECT sum(x) FROM t"); got != 43 {
		t.Fatalf("bucket sum = %d, want 43", got)
	}
	if _, err := h2.Create(context.Background(), "keep"); err == nil || httperr.Status(err) != 409 {
		t.Fatalf("create existing: got %v, want 409", err)
	}
}

func TestDivergedLocalFileIsDroppedAndRestored(t *testing.T) {
	store := newFileStore(t)
	dir := t.TempDir()
	h := newHost(t, store, dir, nil)
	db, err := h.Create(context.Background(), "div")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	write(t, db, "INSERT INTO t VALUES (1)")
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A write the bucket never saw (e.g. local changes after a lost upload).
	c, err := sqlite.OpenConn(filepath.Join(dir, "div.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlconn.Run(c, "INSERT INTO t VALUES (99)"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	h2 := newHost(t, store, dir, nil)
	db2, err := h2.Get(context.Background(), "div")
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db2, "SELECT sum(x) FROM t"); n != 1 {
		t.Fatalf("sum = %d, want the bucket's 1", n)
	}
	// Its unshipped commit was never acknowledged: nothing is kept aside
	// (a copy per reopen would fill the disk).
	if aside, _ := filepath.Glob(filepath.Join(dir, "div.db*")); len(aside) != 4 {
		t.Fatalf("files left: %v, want the database, its WAL, shm and position record", aside)
	}
}

func TestDeleteKeepsReplicaUnlessPurged(t *testing.T) {
	store := newFileStore(t)
	h := newHost(t, store, t.TempDir(), nil)
	db, err := h.Create(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	write(t, db, "INSERT INTO t VALUES (5)")
	if err := h.Delete(context.Background(), "d", false); err != nil {
		t.Fatal(err)
	}
	// Gone locally, still in the bucket.
	if list, _ := h.List(context.Background()); len(list) != 1 || list[0].Name != "d" || list[0].Local {
		t.Fatalf("list after delete = %+v, want d as only in the replica", list)
	}
	db, err = h.Get(context.Background(), "d") // restored from the kept replica
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT x FROM t"); n != 5 {
		t.Fatalf("x = %d", n)
	}
	if err := h.Delete(context.Background(), "d", true); err != nil {
		t.Fatal(err)
	}
	if objs, err := replica.Sub(store, "d").List(context.Background(), ""); err != nil || len(objs) != 0 {
		t.Fatalf("replica after purge: %v objects, err %v", len(objs), err)
	}
	if _, err := h.Get(context.Background(), "d"); err == nil || httperr.Status(err) != 404 {
		t.Fatalf("get after purge: %v, want 404", err)
	}
	if err := ValidateName("../etc"); err == nil {
		t.Fatal("path trick accepted as a name")
	}
}
