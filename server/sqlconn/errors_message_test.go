package sqlconn

import (
	"testing"

	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
)

// Errors carry SQLite's own message, as a client sees on a local file,
// whatever the driver wrapped around it.
func TestSQLiteMessageWithoutDriverPrefixes(t *testing.T) {
	c, err := sqlite.OpenConn(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cached := false // the driver words cached and transient statements' errors differently
	run := func(sql string) error {
		var s *sqlite.Stmt
		var err error
		if cached {
			s, err = c.Prepare(sql)
		} else {
			s, _, err = c.PrepareTransient(sql)
		}
		if err != nil {
			return err
		}
		if !cached {
			defer s.Finalize()
		}
		_, err = s.Step()
		s.Reset()
		return err
	}
	if err := run("CREATE TABLE items (name TEXT NOT NULL UNIQUE)"); err != nil {
		t.Fatal(err)
	}
	if err := run("INSERT INTO items VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	for _, cached = range []bool{false, true} {
		for sql, want := range map[string]string{
			"SELECT * FROM nope": "no such table: nope",
			"SELEC 1":            `near "SELEC": syntax error`,
			"SELECT 'a: b' FROM \"x: 1:1: SQL logic error\"": `no such table: x: 1:1: SQL logic error`,
			"INSERT INTO items VALUES (NULL)":                "NOT NULL constraint failed: items.name",
			"INSERT INTO items VALUES ('a')":                 "UNIQUE constraint failed: items.name",
		} {
			err := run(sql)
			if err == nil {
				t.Fatalf("%s: no error", sql)
			}
			e := dberr.As(sqlError(err, false))
			if e == nil || e.Message != want {
				t.Errorf("%s: message %q (from %q), want %q", sql, e.Message, err, want)
			}
		}
	}
}
