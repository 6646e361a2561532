package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

// breakableStore is a file store whose root can be replaced by a regular
// file, so every write fails for real (ENOTDIR), and put back.
func breakableStore(t *testing.T) (store *file.Store, breakIt, repair func()) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "replica")
	s, err := file.New(root)
	must(t, err)
	breakIt = func() {
		must(t, os.Rename(root, root+".away"))
		must(t, os.WriteFile(root, nil, 0o644))
	}
	repair = func() {
		must(t, os.Remove(root))
		must(t, os.Rename(root+".away", root))
	}
	return s, breakIt, repair
}

func waitTXID(t *testing.T, r *Sidecar, min uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for uint64(r.Pos().TXID) < min {
		if time.Now().After(deadline) {
			t.Fatalf("TXID %d not shipped within 10s (pos %s)", min, r.Pos())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Uploads that keep failing are retried with backoff, not every tick, and
// Run gives up once the error budget is spent, reporting what is unshipped.
func TestReplicatorErrorBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.insert(1)
	store, breakIt, _ := breakableStore(t)
	budget := 1500 * time.Millisecond
	r := NewSidecar(path, store, SidecarOptions{Interval: 20 * time.Millisecond, Logger: testLogger(t), ErrorBudget: budget})
	errc := make(chan error, 1)
	go func() { errc <- r.Run(context.Background()) }()
	waitTXID(t, r, 1)

	breakIt()
	broken := time.Now()
	a.insert(3)
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("Run kept going past its error budget")
	}
	if !errors.Is(err, ErrReplicaUnavailable) {
		t.Fatalf("Run returned %v, want ErrReplicaUnavailable", err)
	}
	if d := time.Since(broken); d < budget {
		t.Fatalf("gave up after %s, before the %s budget", d, budget)
	}
	h := r.Health()
	if h.UnshippedBytes == 0 || h.FailingSince.IsZero() || h.LastErr == nil {
		t.Fatalf("health does not show the unshipped change: %+v", h)
	}
	// At 20 ms ticks without backoff this would be about 75 attempts.
	if h.Errors > 6 {
		t.Fatalf("%d failed attempts in %s: no backoff", h.Errors, budget)
	}
}

// Without a budget the sidecar loop keeps retrying and catches up once the
// store is back.
func TestReplicatorRecoversWithoutBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.insert(1)
	store, breakIt, repair := breakableStore(t)
	var results []error
	r := NewSidecar(path, store, SidecarOptions{Interval: 20 * time.Millisecond, Logger: testLogger(t),
		OnResult: func(err error) { results = append(results, err) }})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	waitTXID(t, r, 1)
	before := r.Pos().TXID

	breakIt()
	a.insert(2)
	deadline := time.Now().Add(10 * time.Second)
	for r.Health().Errors == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failure seen with the store broken")
		}
		time.Sleep(10 * time.Millisecond)
	}
	repair()
	waitTXID(t, r, uint64(before)+1)
	if h := r.Health(); !h.FailingSince.IsZero() || h.UnshippedBytes != 0 {
		t.Fatalf("still failing after catching up: %+v", h)
	}
	cancel()
	must(t, <-errc)
	if len(results) < 2 || results[0] != nil {
		t.Fatalf("OnResult saw %v", results)
	}
}

// A writer that fills the log faster than the interval gets it shipped
// early: 16 MiB of new WAL goes out at once, not at the next tick.
func TestReplicatorShipsALargeBacklogBeforeTheInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	store := newStore(t)
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=0")
	r := NewSidecar(path, store, SidecarOptions{Interval: time.Hour, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.Pos().TXID == 0 && time.Now().Before(deadline) { // the first file, shipped at open
		time.Sleep(10 * time.Millisecond)
	}
	first := r.Pos().TXID
	blob := bytes.Repeat([]byte{7}, 60<<10)
	for i := 0; i < 400; i++ { // about 24 MB of pages
		a.exec("INSERT INTO t(v) VALUES (?)", blob)
	}
	deadline = time.Now().Add(5 * time.Second)
	for r.Pos().TXID == first && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if r.Pos().TXID == first {
		t.Fatalf("24 MB of new WAL still not shipped after 5 s with a 1 h interval (pos %s)", r.Pos())
	}
	cancel()
	must(t, <-errc)
	assertReplicaEquals(t, store, path)
}

// stallingStore holds every create until release is closed, as a store that
// stopped answering does.
type stallingStore struct {
	*file.Store
	armed   atomic.Bool   // hold creates from now on
	stalled chan struct{} // closed when a create is held
	release chan struct{}
	once    sync.Once
}

func (s *stallingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if !s.armed.Load() {
		return s.Store.PutIfAbsent(ctx, key, r, size)
	}
	s.once.Do(func() { close(s.stalled) })
	select {
	case <-s.release:
	case <-ctx.Done():
		return replica.ObjectInfo{}, ctx.Err()
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// While an upload waits on a store that does not answer, Health shows the
// commit waiting at once, not after the attempt gives up.
func TestHealthShowsWhatWaitsDuringAStalledUpload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.insert(1)
	fs, err := file.New(filepath.Join(t.TempDir(), "replica"))
	must(t, err)
	store := &stallingStore{Store: fs, stalled: make(chan struct{}), release: make(chan struct{})}
	r := NewSidecar(path, store, SidecarOptions{Interval: 20 * time.Millisecond, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	waitTXID(t, r, 1)
	store.armed.Store(true)
	a.insert(2)
	select {
	case <-store.stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("no upload started")
	}
	start := time.Now()
	h := r.Health()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Health waited %s for the upload in flight", d)
	}
	if h.UnshippedBytes == 0 || h.UnshippedPages == 0 {
		t.Fatalf("health during a stalled upload: %+v, want the waiting file's size", h)
	}
	close(store.release)
	waitTXID(t, r, 2)
	if h := r.Health(); h.UnshippedBytes != 0 {
		t.Fatalf("after the upload: %+v", h)
	}
	cancel()
	must(t, <-errc)
}

// A file that is not an SQLite database fails at once, not after retrying
// for the whole error budget as if the store were down.
func TestReplicatorRefusesAFileThatIsNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	must(t, os.WriteFile(path, bytes.Repeat([]byte("this is not a database\n"), 300), 0o644))
	store, err := file.New(filepath.Join(t.TempDir(), "replica"))
	must(t, err)
	r := NewSidecar(path, store, SidecarOptions{Interval: 20 * time.Millisecond, ErrorBudget: time.Minute, Logger: testLogger(t)})
	start := time.Now()
	err = r.Run(context.Background())
	if !errors.Is(err, ErrNotDatabase) || errors.Is(err, ErrReplicaUnavailable) {
		t.Fatalf("Run returned %v, want ErrNotDatabase", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s to give up on a file that is not a database", d)
	}
}

// A database file replaced while it replicates (another file renamed over
// its path) ends replication with ErrReplaced: sluice must not report that
// every change is in the replica while it follows the old, unlinked file.
func TestReplicatorStopsWhenTheFileIsReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.db")
	a := newApp(t, path)
	a.insert(1)
	store, err := file.New(filepath.Join(t.TempDir(), "replica"))
	must(t, err)
	r := NewSidecar(path, store, SidecarOptions{Interval: 20 * time.Millisecond, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	waitTXID(t, r, 1)

	other := newApp(t, filepath.Join(dir, "other.db"))
	other.insert(5)
	other.checkpoint("TRUNCATE")
	must(t, os.Rename(filepath.Join(dir, "other.db"), path))
	select {
	case err := <-errc:
		if !errors.Is(err, ErrReplaced) {
			t.Fatalf("Run returned %v, want ErrReplaced", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replication went on following the replaced file")
	}
}
