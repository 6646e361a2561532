package boundedtest

import (
	"context"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
)

// slowStore delays every read of an object body: the connection under it
// stays checked out of the client's pool for as long as the reader is open,
// as it does when a store or the network is slow.
type slowStore struct {
	replica.Store
	delay time.Duration
	open  atomic.Int64
}

func (s *slowStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	s.open.Add(1)
	return &slowReader{ReadCloser: rc, s: s}, nil
}

type slowReader struct {
	io.ReadCloser
	s      *slowStore
	closed atomic.Bool
}

func (r *slowReader) Read(b []byte) (int, error) {
	time.Sleep(r.s.delay)
	return r.ReadCloser.Read(b)
}

func (r *slowReader) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.s.open.Add(-1)
	}
	return r.ReadCloser.Close()
}

func shipWhileSlowCompaction(t *testing.T, otherURL string, backlog replica.Store) {
	ctx := context.Background()
	slow := &slowStore{Store: backlog, delay: 50 * time.Millisecond}  // the pass needs minutes: it outlasts the writes however loaded the machine
	c := compact.New(slow, compact.Config{TempDir: t.TempDir()}, nil) // the process-wide budget, as in production
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.CompactOnce(cctx, time.Now()) }()
	for deadline := time.Now().Add(60 * time.Second); slow.open.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the compaction never opened its inputs")
		}
	}

	// The application's database, shipping to another prefix of the same
	// bucket through the same S3 client (one connection pool per process).
	path := filepath.Join(t.TempDir(), "app.db")
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sqlitex.ExecuteTransient(conn, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)", nil); err != nil {
		t.Fatal(err)
	}
	other := openS3(t, otherURL)
	db, err := engine.Open(ctx, path, other, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		if err := db.Close(cctx); err != nil {
			t.Errorf("close the application's database: %v", err)
		}
	}()
	var last uint64
	for i := range 5 {
		if err := sqlitex.ExecuteTransient(conn, "INSERT INTO t (v) VALUES ('while compacting')", nil); err != nil {
			t.Fatal(err)
		}
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		pos, err := db.Sync(sctx)
		scancel()
		if err != nil {
			t.Fatalf("write %d was not acknowledged while the compaction held %d slow reads: %v", i, slow.open.Load(), err)
		}
		if uint64(pos.TXID) <= last {
			t.Fatalf("write %d: position %s did not advance past %d", i, pos.TXID, last)
		}
		last = uint64(pos.TXID)
		select {
		case err := <-done:
			t.Fatalf("the compaction ended (%v) before the writes did: the store is not slow enough for this test to mean anything", err)
		default:
		}
	}
	t.Logf("5 writes acknowledged while the compaction held up to its budget of slow reads (%d open now)", slow.open.Load())

	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled compaction reported success")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the compaction did not stop within 20s of being cancelled")
	}
	if n := slow.open.Load(); n != 0 {
		t.Errorf("%d object bodies left open by the cancelled compaction", n)
	}
	l1, err := replica.ListLTX(ctx, backlog, 1)
	if err != nil || len(l1) != 0 {
		t.Fatalf("the cancelled pass left level-1 files %v (%v)", l1, err)
	}
}
