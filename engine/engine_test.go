package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/wal"
)

func openDB(t *testing.T, path string, store replica.Store, opts Options) *DB {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	db, err := Open(context.Background(), path, store, opts)
	must(t, err)
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

func sync1(t *testing.T, db *DB) ltx.Pos {
	t.Helper()
	pos, err := db.Sync(context.Background())
	must(t, err)
	return pos
}

func TestChecksumMatchesDatabaseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=0")
	store := newStore(t)
	db := openDB(t, path, store, Options{})
	for i := 0; i < 30; i++ {
		a.insert(3)
	}
	a.exec("DELETE FROM t WHERE id % 3 = 0")
	pos := sync1(t, db)
	// With no other reader, our PASSIVE checkpoint copies every frame into
	// the DB file, whose checksum must then equal our rolling checksum.
	must(t, db.Checkpoint(context.Background()))
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	got, err := ltx.ChecksumReader(f, int(db.pageSize))
	must(t, err)
	if got != pos.PostApplyChecksum || db.Pos() != pos {
		t.Fatalf("DB file checksum %s, shipped position %s (now %s)", got, pos, db.Pos())
	}
	if pos.TXID != 2 {
		t.Fatalf("TXID %d, want 2 (snapshot, then one file for all the writes)", pos.TXID)
	}
	assertReplicaEquals(t, store, path)
}

func TestCaptureUnderConcurrentWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := newStore(t)
	db := openDB(t, path, store, Options{CheckpointPages: 50})
	ctx := context.Background()

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 0; i < 400; i++ {
			a.insert(1 + i%3)
			if i%50 == 49 {
				a.exec("UPDATE t SET v = zeroblob(100) WHERE id % 7 = 0")
				a.exec("DELETE FROM t WHERE id % 11 = 0")
			}
		}
	}()
	syncs := 0
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
			if _, err := db.Sync(ctx); err != nil {
				t.Errorf("Sync: %v", err)
			}
			syncs++
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	must(t, db.Close(ctx))
	pos := assertReplicaEquals(t, store, path)
	if pos != db.Pos() || pos.TXID < 3 {
		t.Fatalf("replica at %s, DB at %s after %d syncs", pos, db.Pos(), syncs)
	}
}

func TestAppCheckpointsAggressively(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=10")
	store := newStore(t)
	// Small thresholds so sluice's own PASSIVE and TRUNCATE checkpoints run too.
	db := openDB(t, path, store, Options{CheckpointPages: 20, TruncatePages: 30})
	ctx := context.Background()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 300; i++ {
			a.insert(1 + i%4)
			switch i % 9 {
			case 3:
				a.checkpoint("TRUNCATE")
			case 6:
				a.checkpoint("RESTART")
			}
			if i%60 == 59 {
				a.exec("DELETE FROM t WHERE id % 2 = 0")
				a.exec("VACUUM") // shrinks the database
			}
		}
	}()
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
			if _, err := db.Sync(ctx); err != nil {
				t.Errorf("Sync: %v", err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	must(t, db.Close(ctx))
	assertReplicaEquals(t, store, path)
}

func TestFencing(t *testing.T) {
	dir := t.TempDir()
	store := newStore(t)
	ctx := context.Background()

	pathA := filepath.Join(dir, "a.db")
	a := newApp(t, pathA)
	a.insert(5)
	dbA := openDB(t, pathA, store, Options{}) // ships TXID 1

	pathB := filepath.Join(dir, "b.db")
	b := newApp(t, pathB)
	b.insert(7)
	dbB := openDB(t, pathB, store, Options{}) // differs: ships TXID 2 over A's history
	if got := dbB.Pos().TXID; got != 2 {
		t.Fatalf("second writer at TXID %d, want 2", got)
	}
	key := replica.LTXKey(0, 2, 2)
	before := readObject(t, store, key)

	a.insert(1)
	_, err := dbA.Sync(ctx)
	if !errors.Is(err, ErrFenced) || !errors.Is(err, replica.ErrExists) {
		t.Fatalf("first writer's Sync: got %v, want ErrFenced wrapping ErrExists", err)
	}
	a.insert(1)
	if _, err := dbA.Sync(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("Sync after fencing: got %v, want ErrFenced", err)
	}
	if err := dbA.Checkpoint(ctx); !errors.Is(err, ErrFenced) {
		t.Fatalf("Checkpoint after fencing: got %v, want ErrFenced", err)
	}
	if !bytes.Equal(readObject(t, store, key), before) {
		t.Fatalf("%s changed after the fenced writer tried to ship", key)
	}
	files, err := replica.ListLTX(ctx, store, 0)
	must(t, err)
	if len(files) != 2 {
		t.Fatalf("replica holds %d files, want 2", len(files))
	}
	assertReplicaEquals(t, store, pathB)
}

func readObject(t *testing.T, store replica.Store, key string) []byte {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	must(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	must(t, err)
	return b
}

func TestIdleMakesNoStoreRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.insert(10)
	store := &countingStore{Store: newStore(t)}
	db := openDB(t, path, store, Options{})
	a.insert(2)
	pos := sync1(t, db)
	store.calls.Store(0)
	for i := 0; i < 5; i++ {
		if got := sync1(t, db); got != pos {
			t.Fatalf("idle Sync moved the position from %s to %s", pos, got)
		}
	}
	_, n := contentHash(t, path) // the app reads: still idle
	if n != 12 {
		t.Fatalf("%d rows, want 12", n)
	}
	sync1(t, db)
	if got := store.calls.Load(); got != 0 {
		t.Fatalf("idle Syncs made %d store requests, want 0", got)
	}
	a.insert(1)
	if got := sync1(t, db); got.TXID != pos.TXID+1 {
		t.Fatalf("after a write: TXID %d, want %d", got.TXID, pos.TXID+1)
	}
	if got := store.calls.Load(); got != 1 {
		t.Fatalf("one change made %d store requests, want 1 (the conditional create)", got)
	}
}

func TestRestartShipsTheDifference(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := &countingStore{Store: newStore(t)}
	ctx := context.Background()

	db, err := Open(ctx, path, store, Options{Logger: testLogger(t)})
	must(t, err)
	a.insert(20)
	sync1(t, db)
	must(t, db.Close(ctx))
	pos := db.Pos()

	// Reopen with no change: continue at the same position, ship nothing.
	store.calls.Store(0)
	db, err = Open(ctx, path, store, Options{Logger: testLogger(t)})
	must(t, err)
	if db.Pos() != pos {
		t.Fatalf("reopened at %s, want %s", db.Pos(), pos)
	}
	must(t, db.Close(ctx))
	files, err := replica.ListLTX(ctx, store, 0)
	must(t, err)
	if len(files) != int(pos.TXID) {
		t.Fatalf("reopening shipped something: %d files for TXID %d", len(files), pos.TXID)
	}

	// Write without sluice, then reopen: the difference is shipped.
	a.insert(15)
	a.exec("DELETE FROM t WHERE id < 5")
	a.exec("PRAGMA wal_checkpoint(TRUNCATE)")
	db = openDB(t, path, store, Options{})
	if db.Pos().TXID != pos.TXID+1 {
		t.Fatalf("after offline writes: TXID %d, want %d", db.Pos().TXID, pos.TXID+1)
	}
	assertReplicaEquals(t, store, path)
	a.insert(3)
	sync1(t, db)
	assertReplicaEquals(t, store, path)
}

func TestRequireMatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := newStore(t)
	ctx := context.Background()
	db, err := Open(ctx, path, store, Options{Logger: testLogger(t)})
	must(t, err)
	must(t, db.Close(ctx))
	a.insert(4)
	_, err = Open(ctx, path, store, Options{Logger: testLogger(t), RequireMatch: true})
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("got %v, want ErrDiverged", err)
	}
	files, err := replica.ListLTX(ctx, store, 0)
	must(t, err)
	if len(files) != 1 {
		t.Fatalf("RequireMatch shipped something: %d files", len(files))
	}
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "missing.db"), store, Options{}); err == nil {
		t.Fatal("Open of a missing database succeeded")
	}
}

func TestUploadFailureRetriesSameTXID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := &failingStore{Store: newStore(t)}
	db := openDB(t, path, store, Options{})
	start := db.Pos()

	store.mu.Lock()
	store.fail, store.keys = 3, nil
	store.mu.Unlock()
	a.insert(2)
	for i := 0; i < 3; i++ {
		if _, err := db.Sync(context.Background()); !errors.Is(err, errInjected) {
			t.Fatalf("Sync %d: got %v, want the injected failure", i, err)
		}
		if db.Pos() != start {
			t.Fatalf("position moved to %s on a failed upload", db.Pos())
		}
		a.insert(1) // more writes while failing
	}
	pos := sync1(t, db) // retries the same file, then ships the new frames
	store.mu.Lock()
	keys := append([]string(nil), store.keys...)
	store.mu.Unlock()
	want := replica.LTXKey(0, start.TXID+1, start.TXID+1)
	for i := 0; i < 4; i++ {
		if keys[i] != want {
			t.Fatalf("attempt %d went to %s, want %s (all: %v)", i, keys[i], want, keys)
		}
	}
	if pos.TXID != start.TXID+2 || len(keys) != 5 {
		t.Fatalf("after recovery at TXID %d with attempts %v", pos.TXID, keys)
	}
	assertReplicaEquals(t, store, path)
}

func TestResyncByDiff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=0")
	store := newStore(t)
	db := openDB(t, path, store, Options{})
	a.insert(10)
	sync1(t, db)
	// Pretend the cursor is past the end of the log with the same salts: an
	// inconsistency that only a full read can repair.
	db.mu.Lock()
	db.wcur.off += 100 * db.wcur.hdr.FrameSize()
	db.mu.Unlock()
	a.insert(3)
	a.exec("UPDATE t SET v = x'00' WHERE id = 2")
	before := db.Pos()
	pos := sync1(t, db)
	if pos.TXID != before.TXID+1 {
		t.Fatalf("resync shipped TXID %d, want %d", pos.TXID, before.TXID+1)
	}
	assertReplicaEquals(t, store, path)
	a.insert(1)
	sync1(t, db)
	assertReplicaEquals(t, store, path)
}

func TestReplicator(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	store := newStore(t)
	r := NewSidecar(path, store, SidecarOptions{Interval: 40 * time.Millisecond, Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()

	time.Sleep(60 * time.Millisecond) // the file does not exist yet: Run waits
	a := newApp(t, path)
	for i := 0; i < 20; i++ {
		a.insert(2)
		time.Sleep(5 * time.Millisecond)
	}
	// The start may be retried (a busy database's wal-index in flux) until
	// after the inserts, whose rows its snapshot then holds: wait for the
	// snapshot, then for a commit made after it.
	waitPast := func(txid ltx.TXID, what string) ltx.TXID {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for r.Pos().TXID <= txid && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if r.Pos().TXID <= txid {
			t.Fatalf("%s: nothing shipped within 10s (pos %s)", what, r.Pos())
		}
		return r.Pos().TXID
	}
	first := waitPast(0, "snapshot")
	a.insert(2)
	waitPast(first, "a commit after the snapshot")
	a.insert(5) // shipped by the final Sync at shutdown at the latest
	cancel()
	select {
	case err := <-errc:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	assertReplicaEquals(t, store, path)
}

func TestReplicatorStopsWhenFenced(t *testing.T) {
	dir := t.TempDir()
	store := newStore(t)
	pathA := filepath.Join(dir, "a.db")
	a := newApp(t, pathA)
	a.insert(1)
	r := NewSidecar(pathA, store, SidecarOptions{Interval: 20 * time.Millisecond, Logger: testLogger(t)})
	errc := make(chan error, 1)
	go func() { errc <- r.Run(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.Pos().TXID < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	pathB := filepath.Join(dir, "b.db")
	b := newApp(t, pathB)
	b.insert(2)
	openDB(t, pathB, store, Options{}) // takes TXID 2
	a.insert(1)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("Run returned %v, want ErrFenced", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after being fenced")
	}
}

func TestWALRestartBetweenSyncs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=0")
	store := newStore(t)
	db := openDB(t, path, store, Options{})
	ctx := context.Background()

	a.insert(10)
	sync1(t, db)
	must(t, db.Checkpoint(ctx)) // WAL fully backfilled; our new reader holds read-mark 0
	salt := db.wcur.hdr.Salt1
	a.insert(5) // the app restarts the log
	sync1(t, db)
	if db.wcur.hdr.Salt1 == salt {
		t.Fatal("the application's write after a full checkpoint did not restart the WAL")
	}
	assertReplicaEquals(t, store, path)

	// Truncation by the application while sluice holds read-mark 0 and has
	// captured everything: allowed, and nothing is lost.
	a.insert(2)
	must(t, db.Checkpoint(ctx))
	a.checkpoint("TRUNCATE")
	if st, err := os.Stat(path + "-wal"); err != nil || st.Size() != 0 {
		t.Fatalf("the application's TRUNCATE did not truncate the WAL: %v %v", st.Size(), err)
	}
	a.insert(3)
	sync1(t, db)
	a.insert(1)
	sync1(t, db)
	assertReplicaEquals(t, store, path)
}

// OnShip gets a small file's bytes exactly as the store holds them (the
// level-1 merge reads them instead of the object), and Changed says whether
// a Sync has anything to upload.
func TestOnShipGivesSmallFilesBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := newStore(t)
	type shipped struct {
		f    replica.LTXFile
		body []byte
	}
	var got []shipped
	db := openDB(t, path, store, Options{OnShip: func(f replica.LTXFile, body []byte) {
		got = append(got, shipped{f, append([]byte(nil), body...)})
	}})
	sync1(t, db)
	if changed, err := db.Changed(); err != nil || changed {
		t.Fatalf("Changed() = %v, %v after a Sync with no new commit", changed, err)
	}
	a.insert(1)
	if changed, err := db.Changed(); err != nil || !changed {
		t.Fatalf("Changed() = %v, %v with a commit not shipped", changed, err)
	}
	sync1(t, db)
	if len(got) < 2 {
		t.Fatalf("OnShip called %d times, want a snapshot and a commit", len(got))
	}
	for _, s := range got {
		rc, err := store.Get(context.Background(), s.f.Key)
		must(t, err)
		want, err := io.ReadAll(rc)
		rc.Close()
		must(t, err)
		if !bytes.Equal(s.body, want) {
			t.Fatalf("%s: OnShip's %d bytes differ from the stored %d", s.f.Key, len(s.body), len(want))
		}
	}
}

// walAhead counts a log restarted since the last capture as all new, though
// it is shorter than the old cursor (truncated) or the same length (reused):
// a writer going flat out between checkpoints is shipped early only so.
func TestWALAheadCountsARestartedLogAsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	db := openDB(t, path, newStore(t), Options{})
	ctx := context.Background()
	blob := bytes.Repeat([]byte{9}, 100<<10)
	for range 5 {
		a.exec("INSERT INTO t(v) VALUES (?)", blob)
	}
	sync1(t, db)
	if got := db.walAhead(); got != 0 {
		t.Fatalf("after a sync the log is %d bytes ahead", got)
	}
	cursor := db.wcur.off
	must(t, db.Checkpoint(ctx))
	a.checkpoint("TRUNCATE")
	for i := 1; i <= 2; i++ {
		a.exec("INSERT INTO t(v) VALUES (?)", blob)
		st, err := os.Stat(path + "-wal")
		must(t, err)
		if st.Size() >= cursor {
			t.Fatalf("the restarted log (%d bytes) should be shorter than the old cursor (%d)", st.Size(), cursor)
		}
		if got, want := db.walAhead(), st.Size()-wal.HeaderSize; got != want {
			t.Fatalf("insert %d into the truncated log: %d bytes ahead, want all its frames' %d", i, got, want)
		}
	}
	sync1(t, db)
	if got := db.walAhead(); got != 0 {
		t.Fatalf("after the next sync the log is %d bytes ahead", got)
	}
	// Backfilled in full, the log restarts over its old frames at the next
	// write without shrinking.
	must(t, db.Checkpoint(ctx))
	before, err := os.Stat(path + "-wal")
	must(t, err)
	a.exec("INSERT INTO t(v) VALUES (?)", blob[:10<<10])
	after, err := os.Stat(path + "-wal")
	must(t, err)
	if after.Size() != before.Size() {
		t.Fatalf("the log should have restarted in place (%d -> %d bytes)", before.Size(), after.Size())
	}
	if got := db.walAhead(); got <= 0 || got >= after.Size()/2 {
		t.Fatalf("after a 10 KB insert into the reused log: %d bytes ahead of a %d-byte file", got, after.Size())
	}
}
