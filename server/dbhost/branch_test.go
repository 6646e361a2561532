package dbhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/server/dberr"
)

// A branch holds its source's state at the TXID asked for, is in the bucket
// (its own prefix) when Branch returns, takes writes of its own, and is
// refused without leaving a file when its name is taken here or in the
// bucket or its source has no replica.
func TestBranchAtTXIDIsIndependentAndDurable(t *testing.T) {
	ctx := context.Background()
	store := newFileStore(t)
	h := newHost(t, store, t.TempDir(), nil)
	src, err := h.Create(ctx, "src")
	if err != nil {
		t.Fatal(err)
	}
	write(t, src, "CREATE TABLE t (id INTEGER PRIMARY KEY)")
	var marks []Bookmark
	for i := 0; i < 4; i++ {
		marks = append(marks, write(t, src, "INSERT INTO t DEFAULT VALUES"))
	}
	br, err := h.Branch(ctx, "br", "src", ltx.TXID(marks[1]))
	if err != nil {
		t.Fatal(err)
	}
	if n := restoredCount(t, store, "br", "SELECT count(*) FROM t"); n != 2 {
		t.Fatalf("the branch's replica right after Branch holds %d rows, want 2", n)
	}
	write(t, br, "INSERT INTO t DEFAULT VALUES")
	write(t, src, "INSERT INTO t DEFAULT VALUES")
	if b, s := restoredCount(t, store, "br", "SELECT count(*) FROM t"), restoredCount(t, store, "src", "SELECT count(*) FROM t"); b != 3 || s != 5 {
		t.Fatalf("restored: branch %d rows, source %d; want 3 and 5", b, s)
	}
	latest, err := h.Branch(ctx, "latest", "src", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, latest, "SELECT count(*) FROM t"); n != 5 {
		t.Fatalf("a branch of the newest state holds %d rows, want 5", n)
	}

	if _, err := h.Branch(ctx, "br", "src", 0); !errors.Is(err, dberr.ErrExists) {
		t.Fatalf("branch onto an open database: %v, want ALREADY_EXISTS", err)
	}
	if _, err := h.Branch(ctx, "src", "src", 0); !errors.Is(err, dberr.ErrBadRequest) {
		t.Fatalf("branch onto its source: %v, want BAD_REQUEST", err)
	}
	// Another instance (an empty data directory) sees br in the bucket only.
	dir2 := t.TempDir()
	h2 := newHost(t, store, dir2, nil)
	if _, err := h2.Branch(ctx, "br", "src", 0); !errors.Is(err, dberr.ErrExists) {
		t.Fatalf("branch onto a database in the bucket only: %v, want ALREADY_EXISTS", err)
	}
	if _, err := h2.Branch(ctx, "x", "nosuch", 0); !errors.Is(err, dberr.ErrNotFound) {
		t.Fatalf("branch of a missing source: %v, want NOT_FOUND", err)
	}
	for _, name := range []string{"br", "x"} {
		if _, err := os.Stat(filepath.Join(dir2, name+".db")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a refused branch left %s.db: %v", name, err)
		}
	}
}
