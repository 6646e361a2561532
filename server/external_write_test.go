package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// A row written to a served database's file by another process's SQLite
// connection (an sqlite3 shell) reaches the replica within two polls,
// with no API write to carry it.
func TestExternalWriteIsShipped(t *testing.T) {
	const poll = 500 * time.Millisecond
	var dataDir string
	_, ts, store := newTestServer(t, func(c *Config) {
		c.Limits.ExternalWritePoll = Duration(poll)
		dataDir = c.DataDir
	})
	if r := do(t, "PUT", ts.URL+"/v1/databases/app", "", ""); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", ts.URL+"/v1/databases/app/query", "", `{"sql":"CREATE TABLE t (id INTEGER PRIMARY KEY, msg TEXT)"}`); r.status != 200 {
		t.Fatalf("create table: %d %s", r.status, r.body)
	}

	conn, err := sqlite.OpenConn(filepath.Join(dataDir, "app.db"), sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetBusyTimeout(5 * time.Second)
	if err := sqlitex.ExecuteTransient(conn, "INSERT INTO t (msg) VALUES ('written beside the server')", nil); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	time.Sleep(2 * poll)
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "app"), out, restore.Options{}); err != nil {
		t.Fatal(err)
	}
	rc, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var msg string
	err = sqlitex.ExecuteTransient(rc, "SELECT msg FROM t", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
		msg = s.ColumnText(0)
		return nil
	}})
	if err != nil || msg != "written beside the server" {
		t.Fatalf("restored replica: msg %q, err %v; want the row written beside the server", msg, err)
	}
}
