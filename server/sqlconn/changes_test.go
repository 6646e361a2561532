package sqlconn

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// A statement's changes are its own rows, whatever its first keyword: the
// rows its triggers and foreign-key actions change are not counted, as
// sqlite3_changes() and a local file's clients count them.
func TestChangesCountTheStatementsOwnRows(t *testing.T) {
	c, err := Open(filepath.Join(t.TempDir(), "db"), OwnWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exec := func(sql string) Result {
		t.Helper()
		res, err := c.Exec(context.Background(), Stmt{SQL: sql})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return res
	}
	exec("CREATE TABLE pa (id INTEGER PRIMARY KEY)")
	exec("CREATE TABLE log (x)")
	exec("CREATE TABLE ch (id INTEGER PRIMARY KEY, pid INTEGER REFERENCES pa(id) ON DELETE CASCADE)")
	exec("CREATE TRIGGER pa_log AFTER INSERT ON pa BEGIN INSERT INTO log VALUES (1), (2); END")
	for _, c := range []struct {
		sql  string
		want int64
	}{ // in this order: the DELETE cascades to the children inserted before it
		{"INSERT INTO pa (id) VALUES (1), (2)", 2},
		{"WITH s(n) AS (VALUES (3), (4)) INSERT INTO pa (id) SELECT n FROM s", 2},
		{"INSERT INTO ch VALUES (10, 1), (11, 1)", 2},
		{"WITH s(n) AS (VALUES (1)) DELETE FROM pa WHERE id IN (SELECT n FROM s)", 1},
		{"WITH s(n) AS (VALUES (1)) SELECT n FROM s", 0},
		{"WITH s(n) AS (VALUES (99)) UPDATE pa SET id = id WHERE id IN (SELECT n FROM s)", 0},
	} {
		if got := exec(c.sql).Changes; got != c.want {
			t.Errorf("%s: changes = %d, want %d", c.sql, got, c.want)
		}
	}
}
