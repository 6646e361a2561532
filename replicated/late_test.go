package replicated

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
)

// stallingStore makes renewals fail and holds history uploads until the
// lease has run out, as a holder paused mid-upload (SIGSTOP) would see.
type stallingStore struct {
	replica.Store
	stall atomic.Bool
	l     atomic.Pointer[lease.Lease]
}

func (s *stallingStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if s.stall.Load() {
		return replica.ObjectInfo{}, errors.New("renewal stalled")
	}
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

func (s *stallingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if s.stall.Load() && strings.HasPrefix(key, replica.LTXDir+"/") {
		for s.l.Load().Valid() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// An upload the store accepts after the holder's lease deadline is in the
// history but acknowledges nothing: Sync says so (lease.ErrLate) and the
// database writes nothing more until the lease is renewed; the file is
// restorable for whoever holds the lease next.
func TestUploadAfterTheLeaseDeadlineIsNotAcknowledged(t *testing.T) {
	store := &stallingStore{Store: newStore(t)}
	l, err := lease.TryAcquire(context.Background(), store, lease.Options{Holder: "a", TTL: time.Second, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	store.l.Store(l)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	lost := make(chan error, 1)
	db, err := Open(context.Background(), path, Options{Name: "app", Store: store, Lease: l, Logger: testLogger(t),
		OnLeaseLost: func(cause error) { lost <- cause }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background(), false)
	if _, err := db.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.exec("INSERT INTO t VALUES (1)")
	store.stall.Store(true)
	pos, err := db.Sync(context.Background())
	if !errors.Is(err, lease.ErrLate) {
		t.Fatalf("Sync of an upload accepted after the deadline = %v, %v; want lease.ErrLate", pos, err)
	}
	if db.Writable() {
		t.Fatal("still writable after the lease deadline")
	}
	if n := rowsInReplica(t, store.Store); n != 1 {
		t.Fatalf("replica has %d rows, want the late file's 1 (it is in the history)", n)
	}
	// Nobody took the lease: once renewals get through, it resumes.
	store.stall.Store(false)
	for deadline := time.Now().Add(5 * time.Second); !db.Writable(); {
		if time.Now().After(deadline) {
			t.Fatal("the lease did not resume")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-lost:
		t.Fatalf("write role ended for a lease nobody took: %v", err)
	default:
	}
	a.exec("INSERT INTO t VALUES (2)")
	if _, err := db.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rowsInReplica(t, store.Store); n != 2 {
		t.Fatalf("replica has %d rows, want 2", n)
	}
}
