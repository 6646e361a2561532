package sqlitestmt

import (
	"path/filepath"
	"testing"

	"zombiezen.com/go/sqlite"
)

func prep(t *testing.T, c *sqlite.Conn, sql string) *sqlite.Stmt {
	t.Helper()
	s, _, err := c.PrepareTransient(sql)
	if err != nil {
		t.Fatalf("prepare %q: %v", sql, err)
	}
	t.Cleanup(func() { s.Finalize() })
	return s
}

func run(t *testing.T, c *sqlite.Conn, sql string) {
	t.Helper()
	s := prep(t, c, sql)
	if _, err := s.Step(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestWhatSQLiteKnowsAboutAStatement(t *testing.T) {
	c, err := sqlite.OpenConn(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := For(c)
	run(t, c, "CREATE TABLE t (id INTEGER PRIMARY KEY, at DATETIME, ok BOOLEAN)")

	for _, sql := range []string{"-- only a comment", "/* c */", ";", "  \n\t"} {
		if s := prep(t, c, sql); !Empty(s) || !in.ReadOnly(s) || in.ColumnName(s, 0) != "" {
			t.Errorf("%q: want an empty, read-only statement", sql)
		}
	}
	readOnly := map[string]bool{
		"SELECT * FROM t":                       true,
		"PRAGMA table_info(t)":                  true,
		"DROP TABLE IF EXISTS missing":          false, // whether or not the table exists: stable
		"DROP TABLE IF EXISTS t":                false,
		"INSERT INTO t (at) VALUES (1)":         false,
		"CREATE INDEX IF NOT EXISTS i ON t(at)": false,
		"EXPLAIN DELETE FROM t":                 false, // SQLite says so; callers treat EXPLAIN as a read
	}
	for sql, want := range readOnly {
		if s := prep(t, c, sql); Empty(s) || in.ReadOnly(s) != want {
			t.Errorf("%q: read-only %v, want %v", sql, in.ReadOnly(s), want)
		}
	}
	if s := prep(t, c, "EXPLAIN SELECT 1"); !in.Explain(s) {
		t.Error("EXPLAIN SELECT 1 is not reported as EXPLAIN")
	}
	s := prep(t, c, "SELECT 1 AS a, 2 AS a, t.at, t.ok, t.id + 1 FROM t")
	var names, types []string
	for i := range s.ColumnCount() {
		names, types = append(names, in.ColumnName(s, i)), append(types, in.DeclType(s, i))
	}
	if want := []string{"a", "a", "at", "ok", "t.id + 1"}; !equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if want := []string{"", "", "DATETIME", "BOOLEAN", ""}; !equal(types, want) {
		t.Errorf("declared types %q, want %q", types, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
