package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

func q(t *testing.T, c *sqlite.Conn, s string) string {
	var out string
	err := sqlitex.ExecuteTransient(c, s, &sqlitex.ExecOptions{ResultFunc: func(st *sqlite.Stmt) error {
		for i := 0; i < st.ColumnCount(); i++ {
			out += st.ColumnText(i) + " "
		}
		out += "|"
		return nil
	}})
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return out
}

func TestScratch(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.db")
	os.WriteFile(p, nil, 0o644)
	c, err := sqlite.OpenConn(p, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	c.SetBusyTimeout(time.Second)
	t.Log("jm", q(t, c, "PRAGMA journal_mode=WAL"))
	fi, _ := os.Stat(p)
	t.Log("size after wal", fi.Size())
	w, _ := sqlite.OpenConn(p, sqlite.OpenReadWrite)
	w.SetBusyTimeout(time.Second)
	q(t, w, "PRAGMA wal_autocheckpoint=0")
	q(t, w, "CREATE TABLE t(x)")
	t.Log("dv", q(t, c, "PRAGMA data_version"))
	q(t, w, "INSERT INTO t VALUES(1)")
	t.Log("dv after other commit", q(t, c, "PRAGMA data_version"))
	t.Log("ckpt", q(t, c, "PRAGMA wal_checkpoint(TRUNCATE)"))
	t.Log("dv after own truncate", q(t, c, "PRAGMA data_version"))
	fi, _ = os.Stat(p + "-wal")
	t.Log("wal size", fi.Size())
	q(t, w, "INSERT INTO t VALUES(2)")
	t.Log("dv after other commit", q(t, c, "PRAGMA data_version"))
	t.Log("ckpt", q(t, c, "PRAGMA wal_checkpoint(RESTART)"))
	t.Log("dv after own restart", q(t, c, "PRAGMA data_version"))
	t.Log("compile", q(t, c, "select count(*) from pragma_compile_options where compile_options like '%DBPAGE%'"))
}
