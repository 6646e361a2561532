package dbhost

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// lateFile ships one more transaction to name's replica from outside the
// host, as a previous lease holder resumed after a pause would: a copy of
// the replica's latest state, one row added, uploaded as the next TXID.
func lateFile(t *testing.T, store replica.Store, name string, row int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "late.db")
	sub := replica.Sub(store, name)
	if err := EngineReplication(testLogger(t), nil).Restore(context.Background(), sub, path); err != nil {
		t.Fatal(err)
	}
	c, err := sqlite.OpenConn(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlconn.Run(c, fmt.Sprintf("INSERT INTO t VALUES (%d)", row)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	rep, err := replicated.Open(context.Background(), path, replicated.Options{Name: name, Store: sub, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rep.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep.Close(context.Background(), true)
}

// A previous holder's upload lands after this holder took the lease and
// restored: this holder's next upload loses the TXID. Its write was never
// acknowledged and is answered retryable; the holder adopts the late file
// (it is in the one history) and goes on writing: never fenced for good.
func TestLateFileOfThePreviousHolderIsAdopted(t *testing.T) {
	store := newFileStore(t)
	dir := t.TempDir()
	h := newHost(t, store, dir, func(o *Options) {
		o.Lease = &lease.Options{Holder: "new-holder", TTL: time.Second, Poll: 50 * time.Millisecond}
	})
	db, err := h.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	write(t, db, "INSERT INTO t VALUES (1)")
	lateFile(t, store, DefaultDatabase, 100)

	_, err = db.Write(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (2)"})
		return err
	})
	var e *dberr.Error
	if !errors.As(err, &e) || httperr.Status(e) != 503 || strings.Contains(strings.ToLower(e.Message), "fenced") {
		t.Fatalf("write that lost its TXID to the late file: %v, want a retryable 503 that is not a fence", err)
	}
	// Writable again, from the bucket's history.
	var db2 Database
	deadline := time.Now().Add(10 * time.Second)
	for {
		db2, err = h.Get(context.Background(), DefaultDatabase)
		if err == nil {
			if _, err = db2.Write(context.Background(), func(c sqlconn.Conn) error {
				_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (3)"})
				return err
			}); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder did not write again after adopting the late file: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := queryInt(t, db2, "SELECT sum(x) FROM t"); got != 104 {
		t.Fatalf("sum = %d, want 1 + 100 (the late file) + 3; the dropped write 2 must not be there", got)
	}
	if got := restoredCount(t, store, DefaultDatabase, "SELECT sum(x) FROM t"); got != 104 {
		t.Fatalf("restored sum = %d, want 104", got)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*diverged*")); len(left) > 0 {
		t.Fatalf("left %v", left)
	}
}
