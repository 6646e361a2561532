package engine

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// gatedStore holds the conditional create of one key until release is
// closed, then fails it once (failOnce) or lets it through; every other
// key goes straight to the store. It records the keys the store accepted.
type gatedStore struct {
	replica.Store
	key      string
	release  chan struct{}
	failOnce bool
	mu       sync.Mutex
	landed   []string
}

func (s *gatedStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	s.mu.Lock()
	gated := k == s.key && s.release != nil
	fail := gated && s.failOnce
	if fail {
		s.failOnce = false
	}
	s.mu.Unlock()
	if gated {
		select {
		case <-s.release:
		case <-ctx.Done():
			return replica.ObjectInfo{}, ctx.Err()
		}
		if fail {
			return replica.ObjectInfo{}, errInjected
		}
	}
	info, err := s.Store.PutIfAbsent(ctx, k, r, n)
	if err == nil {
		s.mu.Lock()
		s.landed = append(s.landed, k)
		s.mu.Unlock()
	}
	return info, err
}

func (s *gatedStore) has(t *testing.T, k string) bool {
	t.Helper()
	_, err := s.Store.Stat(context.Background(), k)
	if errors.Is(err, replica.ErrNotFound) {
		return false
	}
	must(t, err)
	return true
}

// openPipelined opens path against store with a pipeline of depth, and
// records the TXIDs OnShip reports.
func openPipelined(t *testing.T, path string, store replica.Store, depth int) (*DB, func() []ltx.TXID) {
	t.Helper()
	var mu sync.Mutex
	var shipped []ltx.TXID
	db, err := Open(context.Background(), path, store, Options{Logger: testLogger(t), Pipeline: depth,
		OnShip: func(f replica.LTXFile, _ []byte) { mu.Lock(); shipped = append(shipped, f.MaxTXID); mu.Unlock() }})
	must(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	return db, func() []ltx.TXID { mu.Lock(); defer mu.Unlock(); return slices.Clone(shipped) }
}

// A failed upload in the middle of the pipeline: the file after it lands
// first, yet neither it nor anything later is acknowledged, the position
// stays at the last file with no gap before it, and the next Begin sends
// the failed file again under the same name; then everything is
// acknowledged in order and the replica rebuilds to the live database.
func TestPipelineFailedUploadHoldsBackLaterFilesUntilResent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.insert(1)
	gs := &gatedStore{Store: newStore(t)}
	db, shippedAll := openPipelined(t, path, gs, 4)
	opened := len(shippedAll())
	shipped := func() []ltx.TXID { return shippedAll()[opened:] }
	base := db.Pos().TXID
	n := base + 2 // the second file Begin captures fails
	gs.mu.Lock()
	gs.key, gs.release, gs.failOnce = replica.LTXKey(0, n, n), make(chan struct{}), true
	gs.mu.Unlock()

	var flights []*Flight
	for i := 0; i < 3; i++ {
		a.insert(3)
		f, err := db.Begin(ctx)
		must(t, err)
		flights = append(flights, f)
	}
	if got := []ltx.TXID{flights[0].TXID(), flights[1].TXID(), flights[2].TXID()}; !slices.Equal(got, []ltx.TXID{base + 1, n, n + 1}) {
		t.Fatalf("flights ship as %v, want %d..%d", got, base+1, n+1)
	}
	if pos, err := flights[0].Wait(ctx); err != nil || pos.TXID != base+1 {
		t.Fatalf("first file: pos %d, err %v", pos.TXID, err)
	}
	// N+1 lands while N is held: the store has N+1 without N.
	for deadline := time.Now().Add(10 * time.Second); !gs.has(t, replica.LTXKey(0, n+1, n+1)); {
		if time.Now().After(deadline) {
			t.Fatal("the file after the held one never landed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	levels, err := replica.ListAllLTX(ctx, gs.Store)
	must(t, err)
	if end, tail := replica.InFlightTail(levels); end != base+1 || len(tail) != 1 || tail[0].MaxTXID != n+1 {
		t.Fatalf("InFlightTail = %d, %v; want the history to end at %d with TXID %d in flight past it", end, tail, base+1, n+1)
	}
	close(gs.release) // N fails now
	if _, err := flights[2].Wait(ctx); err == nil || !errors.Is(err, errInjected) {
		t.Fatalf("the file after a failed one was acknowledged (err %v)", err)
	}
	if _, err := flights[1].Wait(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("the failed file: err %v", err)
	}
	if db.Pos().TXID != base+1 {
		t.Fatalf("position moved to %d past the failed TXID %d", db.Pos().TXID, n)
	}
	if got := shipped(); !slices.Equal(got, []ltx.TXID{base + 1}) {
		t.Fatalf("OnShip saw %v while TXID %d was missing", got, n)
	}

	// The next Begin (nothing new committed) sends N again.
	f, err := db.Begin(ctx)
	must(t, err)
	pos, err := f.Wait(ctx)
	if err != nil || pos.TXID != n+1 {
		t.Fatalf("after resending: pos %d, err %v; want %d", pos.TXID, err, n+1)
	}
	if got := shipped(); !slices.Equal(got, []ltx.TXID{base + 1, n, n + 1}) {
		t.Fatalf("OnShip saw %v, want TXIDs %d..%d in order", got, base+1, n+1)
	}
	if _, err := flights[2].Wait(ctx); err != nil {
		t.Fatalf("a wait after the resend: %v", err)
	}
	a.insert(2)
	f, err = db.Begin(ctx)
	must(t, err)
	if _, err := f.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := assertReplicaEquals(t, gs.Store, path); got.TXID != n+2 {
		t.Fatalf("rebuilt at %d, want %d", got.TXID, n+2)
	}
}

// Another writer takes TXID N while this one has N+1 in flight: the
// writer is fenced, acknowledges neither, and deletes its N+1 so the new
// owner's next name is free.
func TestPipelineFencedWriterRemovesWhatItLandedPastTheLostTXID(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.insert(1)
	gs := &gatedStore{Store: newStore(t)}
	db, shippedAll := openPipelined(t, path, gs, 4)
	opened := len(shippedAll())
	shipped := func() []ltx.TXID { return shippedAll()[opened:] }
	n := db.Pos().TXID + 1
	gs.mu.Lock()
	gs.key, gs.release = replica.LTXKey(0, n, n), make(chan struct{})
	gs.mu.Unlock()

	a.insert(2)
	fN, err := db.Begin(ctx)
	must(t, err)
	a.insert(2)
	fN1, err := db.Begin(ctx)
	must(t, err)
	for deadline := time.Now().Add(10 * time.Second); !gs.has(t, replica.LTXKey(0, n+1, n+1)); {
		if time.Now().After(deadline) {
			t.Fatal("N+1 never landed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The other writer's N lands first.
	_, err = replica.PutLTX(ctx, gs.Store, 0, n, n, []byte("another writer's file"))
	must(t, err)
	close(gs.release)
	for _, f := range []*Flight{fN, fN1} {
		if _, err := f.Wait(ctx); !errors.Is(err, ErrFenced) {
			t.Fatalf("TXID %d: want ErrFenced, got %v", f.TXID(), err)
		}
	}
	if got := shipped(); len(got) != 0 {
		t.Fatalf("OnShip saw %v from a fenced pipeline", got)
	}
	for deadline := time.Now().Add(10 * time.Second); gs.has(t, replica.LTXKey(0, n+1, n+1)); {
		if time.Now().After(deadline) {
			t.Fatalf("the fenced writer left its TXID %d in the other writer's history", n+1)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := db.Begin(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("Begin after the fence: %v", err)
	}
}
