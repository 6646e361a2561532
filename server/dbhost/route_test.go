package dbhost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// where runs sqls through RunAuto and says where they ran ("reader",
// "writer") or the error.
func where(t *testing.T, db Database, sqls ...string) (string, error) {
	t.Helper()
	ran := ""
	_, err := RunAuto(context.Background(), db, sqls, func(c sqlconn.Conn, onReader bool) error {
		ran = "writer"
		if onReader {
			ran = "reader"
		}
		for _, q := range sqls {
			if _, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: q}); err != nil {
				return err
			}
		}
		return nil
	})
	return ran, err
}

func TestRoutingFollowsSQLite(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), nil)
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE p (id INTEGER PRIMARY KEY)")
	write(t, db, "CREATE TABLE a (x TEXT)")
	for _, c := range []struct {
		sqls []string
		want string
	}{
		{[]string{"SELECT * FROM p"}, "reader"},
		{[]string{"PRAGMA table_info(p)", "SELECT * FROM pragma_index_list('p')", "PRAGMA foreign_key_check(p)"}, "reader"},
		{[]string{"PRAGMA read_uncommitted = 1", "PRAGMA busy_timeout = 100", "PRAGMA foreign_keys = ON"}, "reader"},
		{[]string{"EXPLAIN DELETE FROM p"}, "reader"},
		{[]string{"-- nothing", ";"}, "reader"},
		{[]string{"SELECT 1", "INSERT INTO p VALUES (1)"}, "writer"},
		{[]string{"DROP TABLE IF EXISTS missing"}, "writer"},
		{[]string{"CREATE TABLE q (x)", "INSERT INTO q VALUES (1)"}, "writer"}, // q exists only once the first ran
		{[]string{"PRAGMA user_version = 7"}, "writer"},
		{[]string{"ALTER TABLE a ALTER COLUMN x TO x TEXT NOT NULL"}, "writer"}, // libSQL's, which SQLite cannot prepare
	} {
		got, err := where(t, db, c.sqls...)
		if err != nil || got != c.want {
			t.Errorf("%q ran on the %s (%v), want the %s", c.sqls, got, err, c.want)
		}
	}
	if n := queryInt(t, db, "PRAGMA user_version"); n != 7 {
		t.Fatalf("user_version = %d", n)
	}
	// Statements that change the connection run on none of the shared ones.
	for _, sql := range []string{"PRAGMA foreign_keys = OFF", "PRAGMA legacy_alter_table = 1", "PRAGMA case_sensitive_like = true",
		"PRAGMA defer_foreign_keys = ON", "CREATE TEMP TABLE tt (x)", "CREATE TEMP TRIGGER tr AFTER INSERT ON p BEGIN SELECT 1; END",
		"CREATE TRIGGER temp.tr2 AFTER INSERT ON p BEGIN SELECT 1; END"} {
		if _, err := where(t, db, sql); !errors.Is(err, dberr.ErrNeedsOwnConnection) {
			t.Errorf("%s: %v, want a request for a connection of its own", sql, err)
		}
	}
	// Owned settings are read as they are and refused when set.
	for sql, want := range map[string]string{"PRAGMA journal_mode": "wal", "PRAGMA synchronous": "1"} {
		var got string
		_, err := db.Read(context.Background(), func(c sqlconn.Conn) error {
			res, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql, WantRows: true})
			if err == nil {
				got = res.Rows[0][0].Text
				if res.Rows[0][0].Type == sqlconn.Integer {
					got = "1"
				}
			}
			return err
		})
		if err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", sql, got, err, want)
		}
	}
	for _, sql := range []string{"PRAGMA journal_mode = DELETE", "PRAGMA synchronous = FULL", "PRAGMA wal_checkpoint(TRUNCATE)"} {
		_, err := where(t, db, sql)
		if e := dberr.As(err); e == nil || e.Code != dberr.CodeForbidden || !strings.Contains(e.Message, "PRAGMA") {
			t.Errorf("%s: %v, want FORBIDDEN naming the pragma", sql, err)
		}
	}
	// A read-only principal runs everything on a reader; writes fail there.
	ro := ReadOnly(db)
	if got, err := where(t, ro, "SELECT * FROM p"); err != nil || got != "writer" && got != "reader" {
		t.Fatalf("read-only read: %s %v", got, err)
	}
	if _, err := where(t, ro, "INSERT INTO p VALUES (2)"); !errors.Is(err, dberr.ErrReadOnly) {
		t.Fatalf("read-only write: %v, want SQLITE_READONLY", err)
	}
	if _, err := where(t, ro, "PRAGMA query_only = 0"); err == nil {
		t.Fatal("a read-only principal switched query_only off")
	}
}

// A session's connection is the client's own: what it sets holds there,
// StateChanged says so, and a new session starts fresh.
func TestSessionStateIsItsOwn(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), nil)
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := db.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.StateChanged() {
		t.Fatal("a new session reports changed state")
	}
	for _, sql := range []string{"PRAGMA case_sensitive_like = ON", "PRAGMA case_sensitive_like = OFF", "PRAGMA foreign_keys = ON"} {
		mustExec(t, s, sql)
	}
	if s.StateChanged() {
		t.Fatal("settings put back as they were still count as changed")
	}
	mustExec(t, s, "PRAGMA foreign_keys = OFF")
	if !s.StateChanged() {
		t.Fatal("foreign_keys = OFF is not reported")
	}
	mustExec(t, s, "PRAGMA foreign_keys = ON")
	mustExec(t, s, "CREATE TEMP TABLE tt (x)")
	mustExec(t, s, "INSERT INTO tt VALUES (1)")
	if !s.StateChanged() {
		t.Fatal("a TEMP table is not reported")
	}
	s.Close(ctx)
	s2, err := db.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	if _, err := s2.Exec(ctx, sqlconn.Stmt{SQL: "SELECT * FROM tt"}); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("another session sees the TEMP table: %v", err)
	}
	if r := mustExec(t, s2, "SELECT 'a' LIKE 'A'"); r.Rows[0][0].Int != 1 {
		t.Fatal("case_sensitive_like leaked into a new session")
	}
}
