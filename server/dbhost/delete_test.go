package dbhost

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/httperr"
)

// unreachableStore refuses every upload while down, as a bucket does when
// the network or the credentials go away.
type unreachableStore struct {
	replica.Store
	down atomic.Bool
}

var errUnreachable = errors.New("store unreachable")

func (s *unreachableStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if s.down.Load() {
		return replica.ObjectInfo{}, errUnreachable
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

func (s *unreachableStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if s.down.Load() {
		return replica.ObjectInfo{}, errUnreachable
	}
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

func (s *unreachableStore) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if s.down.Load() {
		return replica.ObjectInfo{}, errUnreachable
	}
	return s.Store.Put(ctx, key, r, size)
}

// A delete that keeps the replica promises the database comes back on its
// next use: with commits the bucket does not hold yet (acknowledged under
// -durability async), removing the local file would lose them, so the
// delete is refused and the file kept until they are uploaded.
func TestDeleteRefusedWhileCommitsAreNotInTheReplica(t *testing.T) {
	store := &unreachableStore{Store: newFileStore(t)}
	dir := t.TempDir()
	h := newHost(t, store, dir, func(o *Options) { o.Durability = groupcommit.Async })
	ctx := context.Background()
	db, err := h.Create(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	write(t, db, "INSERT INTO t VALUES (1)")
	store.down.Store(true)
	write(t, db, "INSERT INTO t VALUES (2)") // acknowledged, not uploaded

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = h.Delete(dctx, "d", false)
	if err == nil {
		t.Fatal("delete succeeded with a commit missing from the replica")
	}
	if st := httperr.Status(err); st != 503 {
		t.Errorf("delete error %v: status %d, want 503", err, st)
	}
	if _, statErr := os.Stat(h.path("d")); statErr != nil {
		t.Fatalf("local file removed by a refused delete: %v", statErr)
	}

	// The store is back: the database still holds both rows, and a delete
	// now succeeds and leaves them in the replica.
	store.down.Store(false)
	db, err = h.Get(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t"); n != 2 {
		t.Fatalf("rows after the refused delete: %d, want 2", n)
	}
	if err := h.Delete(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	if n := restoredCount(t, store, "d", "SELECT count(*) FROM t"); n != 2 {
		t.Fatalf("rows restored after the delete: %d, want 2", n)
	}
}

// A database not open here can still hold commits the replica lacks: here
// the server stopped while the store was down. Deleting it (keeping the
// replica) uploads them first.
func TestDeleteOfAClosedDatabaseUploadsItsLocalCommits(t *testing.T) {
	store := &unreachableStore{Store: newFileStore(t)}
	dir := t.TempDir()
	async := func(o *Options) { o.Durability = groupcommit.Async }
	ctx := context.Background()
	first := newHost(t, store, dir, async)
	db, err := first.Create(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	store.down.Store(true)
	write(t, db, "INSERT INTO t VALUES (1)")
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := first.Close(cctx); err == nil {
		t.Fatal("close reported success with a commit missing from the replica")
	} else if !strings.Contains(err.Error(), "commits stay in "+first.path("d")) {
		t.Errorf("close error does not say where the commits are: %v", err)
	}
	store.down.Store(false)

	second := newHost(t, store, dir, async)
	if err := second.Delete(ctx, "d", false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(second.path("d")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("local file after delete: %v", err)
	}
	if n := restoredCount(t, store, "d", "SELECT count(*) FROM t"); n != 1 {
		t.Fatalf("rows restored after the delete: %d, want 1", n)
	}
}
