package dbhost

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

func TestSessionCommitIsDurable(t *testing.T) {
	store := newFileStore(t)
	h := newHost(t, store, t.TempDir(), nil)
	db, err := h.Create(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	s, err := db.Session(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, s, "BEGIN")
	mustExec(t, s, "INSERT INTO t VALUES (1)")
	if s.Autocommit() {
		t.Fatal("autocommit inside BEGIN")
	}
	mustExec(t, s, "COMMIT")
	if got := restoredCount(t, store, "s", "SELECT count(*) FROM t"); got != 1 {
		t.Fatalf("bucket rows after COMMIT = %d", got)
	}
	mustExec(t, s, "BEGIN")
	mustExec(t, s, "INSERT INTO t VALUES (2)")
	if _, err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t"); n != 1 {
		t.Fatalf("rows = %d: Close must roll back the open transaction", n)
	}
	// A read-only view refuses writes.
	ro := ReadOnly(db)
	_, err = ro.Write(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (3)"})
		return err
	})
	var e *dberr.Error
	if !errors.As(err, &e) || httperr.Status(e) != 403 {
		t.Fatalf("write through read-only view: got %v, want 403", err)
	}
}
