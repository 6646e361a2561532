package dbhost

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// heldStore holds every whole-object GET (a restore's body downloads)
// until release is closed; range reads (the on-demand pages) pass.
type heldStore struct {
	replica.Store
	release chan struct{}
}

func (s heldStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

// A database only in the bucket answers reads while its restore cannot
// progress; a write waits for the restore and is then acknowledged and
// durable, and the answers before and after the hand-over agree. Deleting
// a database in the middle of its restore ends it and leaves no file.
func TestColdOpenReadsAtOnceWritesAfterTheRestore(t *testing.T) {
	root := newFileStore(t)
	src := newHost(t, root, t.TempDir(), func(o *Options) { o.StatementTimeout = time.Minute })
	for _, name := range []string{"app", "gone"} {
		db, err := src.Create(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		write(t, db, "CREATE TABLE t (id INTEGER PRIMARY KEY, pad BLOB)")
		write(t, db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000) INSERT INTO t SELECT i, randomblob(300) FROM n")
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	held := heldStore{Store: root, release: make(chan struct{})}
	dir := t.TempDir()
	h := newHost(t, held, dir, func(o *Options) { o.ColdOpen = &coldopen.Options{}; o.StatementTimeout = time.Minute })
	ctx := context.Background()
	db, err := h.Get(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if _, cold := db.(*coldDB); !cold {
		t.Fatalf("Get of a database only in the bucket returned %T, want a cold open", db)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t"); n != 3000 {
		t.Fatalf("cold read: %d rows, want 3000", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "app.db")); err == nil {
		t.Fatal("app.db exists although its restore is held: the read proves nothing")
	}

	wrote := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, func(c sqlconn.Conn) error {
			_, err := c.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t (id) VALUES (3001)"})
			return err
		})
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("a write was answered (%v) before the restore could finish", err)
	case <-time.After(300 * time.Millisecond):
	}

	// Deleting the other one in the middle of its restore.
	gone, err := h.Get(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, gone, "SELECT count(*) FROM t"); n != 3000 {
		t.Fatalf("cold read of gone: %d rows", n)
	}
	if err := h.Delete(ctx, "gone", false); err != nil {
		t.Fatalf("delete in the middle of a cold open's restore: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "gone*")); len(left) != 0 {
		t.Fatalf("files left after the delete: %v", left)
	}

	close(held.release)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("write after the restore: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write was not answered 30 s after the restore was released")
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t"); n != 3001 {
		t.Fatalf("after the hand-over, through the handle of the cold open: %d rows, want 3001", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "app.db")); err != nil {
		t.Fatalf("after the hand-over: %v", err)
	}
	if n := restoredCount(t, root, "app", "SELECT count(*) FROM t"); n != 3001 {
		t.Fatalf("restored from the bucket after the acknowledged write: %d rows, want 3001", n)
	}
	// The deleted one opens again from the bucket.
	again, err := h.Get(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, again, "SELECT count(*) FROM t"); n != 3000 {
		t.Fatalf("gone reopened: %d rows", n)
	}
}
