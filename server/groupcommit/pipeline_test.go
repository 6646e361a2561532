package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
)

// slowStore holds every conditional create for a random 5..40 ms (so later
// uploads often land first) and fails them while failing is set; it counts
// the most held at once.
type slowStore struct {
	replica.Store
	failing        atomic.Bool
	held, mostHeld atomic.Int64
}

func (s *slowStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	h := s.held.Add(1)
	defer s.held.Add(-1)
	for m := s.mostHeld.Load(); h > m && !s.mostHeld.CompareAndSwap(m, h); m = s.mostHeld.Load() {
	}
	time.Sleep(time.Duration(5+rand.IntN(35)) * time.Millisecond)
	if s.failing.Load() {
		return replica.ObjectInfo{}, errors.New("injected upload failure")
	}
	return s.Store.PutIfAbsent(ctx, k, r, n)
}

// openPipelinedDBWith is openDB for a writer holding the replica's lease
// with a pipeline of depth uploads, the Committer's options changed by mod.
func openPipelinedDBWith(t *testing.T, store replica.Store, depth int, mod func(*Options)) *testDB {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.db")
	c, err := sqlconn.Open(path, sqlconn.OwnWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run("PRAGMA user_version=0")
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, err := lease.Acquire(ctx, store, lease.Options{Holder: "a", TTL: 10 * time.Second, Logger: testLogger(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replicated.Open(ctx, path, replicated.Options{Name: "db", Logger: testLogger(t), Store: store,
		RequireMatch: true, Lease: l, Pipeline: depth})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Pipelined() {
		t.Fatal("a lease holder's replica does not pipeline")
	}
	w, err := sqlconn.Open(path, sqlconn.SharedWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sqlconn.Open(path, sqlconn.SharedReader, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Name: "db", ReplicaName: store.String(), Logger: testLogger(t),
		Writer: w, Replica: rep, Pipeline: depth}
	mod(&opts)
	db := &testDB{Committer: New(opts), rep: rep, reader: r, path: path}
	t.Cleanup(func() {
		db.Close()
		rep.Close(context.Background(), false)
		w.Close()
		r.Close()
	})
	return db
}

// Concurrent writers over a slow store with several uploads in flight, and
// a failure window in the middle: every write answered success is in the
// bucket, every bookmark is at or past the write's own TXID and never past
// the durable position, a write answered COMMITTED_NOT_DURABLE ships with
// a later upload, and nothing is acknowledged while an earlier upload is
// missing. Without the gather window (as many uploads in flight as the
// writers make) and with it (waves of writes sharing uploads).
func TestPipelinedWritesAcknowledgedInOrderAndRestored(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gather   time.Duration
		inFlight int64 // at least this many uploads held at once
	}{{"no gather window", -1, 3}, {"gather window", 0, 2}} {
		t.Run(tc.name, func(t *testing.T) { pipelinedWritesRestored(t, tc.gather, tc.inFlight) })
	}
}

func pipelinedWritesRestored(t *testing.T, gather time.Duration, inFlight int64) {
	base := newFileStore(t)
	store := &slowStore{Store: base}
	db := openPipelinedDBWith(t, store, 8, func(o *Options) { o.PipelineGather = gather })
	write(t, db, "CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER)")

	var mu sync.Mutex
	acked := map[int]ltx.TXID{}
	notDurable := 0
	var next atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := int(next.Add(1))
				txid, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
					_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", id, w)})
					return err
				})
				var nd *NotDurableError
				switch {
				case err == nil:
					if pos := db.rep.Pos().TXID; txid > pos {
						t.Errorf("write %d acknowledged at TXID %d, past the durable position %d", id, txid, pos)
					}
					mu.Lock()
					acked[id] = txid
					mu.Unlock()
				case errors.As(err, &nd):
					mu.Lock()
					notDurable++
					mu.Unlock()
				default:
					t.Errorf("write %d: %v", id, err)
					return
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	store.failing.Store(true)
	time.Sleep(300 * time.Millisecond)
	store.failing.Store(false)
	time.Sleep(700 * time.Millisecond)
	close(stop)
	wg.Wait()
	write(t, db, "INSERT INTO t VALUES (0, -1)") // ships whatever the failure window left
	mu.Lock()
	defer mu.Unlock()
	if store.mostHeld.Load() < inFlight {
		t.Fatalf("at most %d uploads in flight at once: nothing was pipelined", store.mostHeld.Load())
	}
	if notDurable == 0 {
		t.Fatal("no write was answered COMMITTED_NOT_DURABLE during the failure window")
	}
	restored := restoredCount(t, base, "SELECT count(*) FROM t")
	all := restoredCount(t, base, fmt.Sprintf("SELECT count(*) FROM t WHERE id BETWEEN 1 AND %d", next.Load()))
	t.Logf("%d acknowledged, %d not durable, %d restored (every write committed: %d); at most %d uploads in flight",
		len(acked), notDurable, restored, next.Load(), store.mostHeld.Load())
	if all != next.Load() {
		t.Fatalf("restored %d of the %d committed writes: a not-durable write was not shipped later", all, next.Load())
	}
	if int(all) < len(acked) {
		t.Fatalf("restored %d rows, %d acknowledged", all, len(acked))
	}
}
