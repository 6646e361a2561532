package sqlconn

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// libSQL's ALTER COLUMN, as drizzle-kit sends it for libSQL databases:
// the column's definition changes in place, existing rows stay as they are
// (not checked), later writes obey the new definition, and the refusals
// libSQL makes (renaming, adding a key) are errors that change nothing.
func TestAlterColumnAsLibSQL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	w, err := Open(path, SharedWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := Open(path, SharedReader, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	run := func(c *Handle, sql string) (Result, error) {
		return c.Exec(context.Background(), Stmt{SQL: sql, WantRows: true})
	}
	write := func(sql string) {
		t.Helper()
		if _, err := run(w, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	queryText := func(c *Handle, sql string) string {
		t.Helper()
		res, err := run(c, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return res.Rows[0][0].Text
	}
	write("CREATE TABLE \"my t\" (id INTEGER PRIMARY KEY, name text, note TEXT DEFAULT 'a,b' CHECK (note <> 'x, y'), UNIQUE (id, name))")
	write("INSERT INTO \"my t\" (name) VALUES (NULL), ('b')")

	// As a client sends it (SQLite cannot prepare it: sluice runs it).
	write("ALTER TABLE `my t` ALTER COLUMN name TO name text NOT NULL DEFAULT '';")
	schema := queryText(w, "SELECT sql FROM sqlite_schema WHERE name = 'my t'")
	want := "CREATE TABLE \"my t\" (id INTEGER PRIMARY KEY, name text NOT NULL DEFAULT '', note TEXT DEFAULT 'a,b' CHECK (note <> 'x, y'), UNIQUE (id, name))"
	if schema != want {
		t.Fatalf("schema after ALTER COLUMN:\n%s\nwant\n%s", schema, want)
	}
	if n, err := run(r, "SELECT count(*) FROM \"my t\" WHERE typeof(name) = 'null'"); err != nil || n.Rows[0][0].Int != 1 {
		t.Fatalf("existing NULL rows: %v (%v), want 1 (libSQL does not check existing rows)", n.Rows, err)
	}
	write("INSERT INTO \"my t\" (id) VALUES (10)") // the new default applies
	if s := queryText(r, "SELECT name FROM \"my t\" WHERE id = 10"); s != "" {
		t.Fatalf("new default: %q", s)
	}
	if _, err := run(w, "INSERT INTO \"my t\" (name) VALUES (NULL)"); err == nil || !strings.Contains(err.Error(), "NOT NULL constraint failed") {
		t.Fatalf("a NULL after the change: %v, want a NOT NULL violation", err)
	}
	// The read connections see the new definition.
	if s := queryText(r, "SELECT group_concat(\"notnull\") FROM pragma_table_info('my t')"); s != "0,1,0" {
		t.Fatalf("table_info notnull on a read connection: %q", s)
	}

	for _, c := range []struct{ sql, wantErr string }{
		{"ALTER TABLE \"my t\" ALTER COLUMN name TO title text", "cannot rename"},
		{"ALTER TABLE \"my t\" ALTER COLUMN name TO name text UNIQUE", "cannot add UNIQUE"},
		{"ALTER TABLE \"my t\" ALTER COLUMN nope TO nope int", "no such column: nope"},
		{"ALTER TABLE missing ALTER COLUMN a TO a int", "no such table: missing"},
		{"ALTER TABLE \"my t\" ALTER COLUMN note TO note TEXT DEFAULT (", "unbalanced"},
		{"ALTER TABLE \"my t\" ALTER COLUMN note TO note TEXT DEFAULT (1 +)", "error in altering note"},
		{"ALTER TABLE \"my t\" ALTER COLUMN note TO note TEXT, extra INT", "one column definition"},
		{"ALTER TABLE \"my t\" ALTER COLUMN note TO note TEXT); CREATE TABLE evil (x", "unbalanced"},
		{"ALTER TABLE \"my t\" ALTER COLUMN note TO note TEXT GENERATED ALWAYS AS (name) STORED", "generated column"},
	} {
		if _, err := run(w, c.sql); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: %v, want an error containing %q", c.sql, err, c.wantErr)
		}
		if s := queryText(w, "SELECT sql FROM sqlite_schema WHERE name = 'my t'"); s != want {
			t.Fatalf("%s changed the schema to %s", c.sql, s)
		}
	}
	// The one complaint is the row the new NOT NULL did not check, as on
	// libSQL: nothing else in the file changed.
	if s := queryText(r, "PRAGMA integrity_check"); s != "NULL value in my t.name" {
		t.Fatalf("integrity_check: %s", s)
	}
}
