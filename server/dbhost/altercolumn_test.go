package dbhost

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/server/sqlconn"
)

// libSQL's ALTER COLUMN, as drizzle-kit sends it for libSQL databases:
// the column's definition changes in place, existing rows stay as they are
// (not checked), later writes obey the new definition, and the refusals
// libSQL makes (renaming, adding a key) are errors that change nothing.
func TestAlterColumnAsLibSQL(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), nil)
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE \"my t\" (id INTEGER PRIMARY KEY, name text, note TEXT DEFAULT 'a,b' CHECK (note <> 'x, y'), UNIQUE (id, name))")
	write(t, db, "INSERT INTO \"my t\" (name) VALUES (NULL), ('b')")

	// Through the router, as a client sends it (SQLite cannot prepare it).
	got, err := where(t, db, "ALTER TABLE `my t` ALTER COLUMN name TO name text NOT NULL DEFAULT '';")
	if err != nil || got != "writer" {
		t.Fatalf("ALTER COLUMN ran on the %s: %v", got, err)
	}
	schema := queryText(t, db, "SELECT sql FROM sqlite_schema WHERE name = 'my t'")
	want := "CREATE TABLE \"my t\" (id INTEGER PRIMARY KEY, name text NOT NULL DEFAULT '', note TEXT DEFAULT 'a,b' CHECK (note <> 'x, y'), UNIQUE (id, name))"
	if schema != want {
		t.Fatalf("schema after ALTER COLUMN:\n%s\nwant\n%s", schema, want)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM \"my t\" WHERE typeof(name) = 'null'"); n != 1 {
		t.Fatalf("existing NULL rows: %d, want 1 (libSQL does not check existing rows)", n)
	}
	write(t, db, "INSERT INTO \"my t\" (id) VALUES (10)") // the new default applies
	if s := queryText(t, db, "SELECT name FROM \"my t\" WHERE id = 10"); s != "" {
		t.Fatalf("new default: %q", s)
	}
	if _, err := where(t, db, "INSERT INTO \"my t\" (name) VALUES (NULL)"); err == nil || !strings.Contains(err.Error(), "NOT NULL constraint failed") {
		t.Fatalf("a NULL after the change: %v, want a NOT NULL violation", err)
	}
	// The read connections see the new definition.
	if s := queryText(t, db, "SELECT group_concat(\"notnull\") FROM pragma_table_info('my t')"); s != "0,1,0" {
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
		if _, err := where(t, db, c.sql); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: %v, want an error containing %q", c.sql, err, c.wantErr)
		}
		if s := queryText(t, db, "SELECT sql FROM sqlite_schema WHERE name = 'my t'"); s != want {
			t.Fatalf("%s changed the schema to %s", c.sql, s)
		}
	}
	// The one complaint is the row the new NOT NULL did not check, as on
	// libSQL: nothing else in the file changed.
	if s := queryText(t, db, "PRAGMA integrity_check"); s != "NULL value in my t.name" {
		t.Fatalf("integrity_check: %s", s)
	}
}

func queryText(t testing.TB, db Database, sql string) string {
	t.Helper()
	var s string
	if _, err := db.Read(context.Background(), func(c sqlconn.Conn) error {
		res, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql, WantRows: true})
		if err == nil && len(res.Rows) > 0 {
			s = res.Rows[0][0].Text
		}
		return err
	}); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}
