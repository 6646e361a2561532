package replicated

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
)

func testLogger(t *testing.T) *slog.Logger { return testenv.Logger(t, slog.LevelInfo) }

func newStore(t *testing.T) replica.Store {
	s, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// app is the application writing the database on its own connection.
type app struct {
	t    *testing.T
	conn *sqlite.Conn
}

func newApp(t *testing.T, path string) *app {
	c, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		t.Fatal(err)
	}
	c.SetBusyTimeout(5 * time.Second)
	t.Cleanup(func() { c.Close() })
	a := &app{t: t, conn: c}
	a.exec("CREATE TABLE IF NOT EXISTS t(x)")
	return a
}

func (a *app) exec(q string) {
	a.t.Helper()
	if err := sqlitex.ExecuteTransient(a.conn, q, nil); err != nil {
		a.t.Fatal(err)
	}
}

// rowsInReplica restores the replica to a new file and counts t's rows.
func rowsInReplica(t *testing.T, store replica.Store) int {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), store, out, restore.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := sqlitex.ResultInt(c.Prep("SELECT count(*) FROM t"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func takeLease(t *testing.T, store replica.Store, holder string) *lease.Lease {
	l, err := lease.TryAcquire(context.Background(), store, lease.Options{Holder: holder, TTL: time.Second, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

func levels(t *testing.T, store replica.Store) [][]replica.LTXFile {
	t.Helper()
	all, err := replica.ListAllLTX(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// shipLog records what OnShip saw.
type shipLog struct {
	mu    sync.Mutex
	files []replica.LTXFile
}

func (s *shipLog) add(f replica.LTXFile) { s.mu.Lock(); s.files = append(s.files, f); s.mu.Unlock() }
func (s *shipLog) len() int              { s.mu.Lock(); defer s.mu.Unlock(); return len(s.files) }

// Open ships the database, Sync ships each commit and tells OnShip, and
// Close ships what is left, merges level 0 and releases the lease.
func TestOpenSyncCloseShipsFlushesAndReleases(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("INSERT INTO t VALUES (1)")
	var shipped shipLog
	db, err := Open(ctx, path, Options{
		Name: "app", Logger: testLogger(t), Store: store, Lease: takeLease(t, store, "a"),
		Compaction: &Compaction{Config: compact.Config{}}, OnShip: shipped.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	if shipped.len() != 1 {
		t.Fatalf("Open shipped %d files to OnShip, want 1", shipped.len())
	}
	for i := 0; i < 3; i++ {
		a.exec("INSERT INTO t VALUES (2)")
		before := db.Pos().TXID
		pos, err := db.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pos.TXID != before+1 || db.Pos() != pos {
			t.Fatalf("Sync moved TXID %d -> %d (Pos %d), want one file", before, pos.TXID, db.Pos().TXID)
		}
	}
	if shipped.len() != 4 {
		t.Fatalf("OnShip saw %d files, want 4", shipped.len())
	}
	a.exec("INSERT INTO t VALUES (3)") // committed, not synced: Close ships it
	if err := db.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	if n := rowsInReplica(t, store); n != 5 {
		t.Fatalf("replica has %d rows after Close, want 5", n)
	}
	if l1, last := levels(t, store)[1], db.Pos().TXID; last != 5 || len(l1) == 0 || l1[len(l1)-1].MaxTXID != last {
		t.Fatalf("level 1 after Close = %v, want level 0 merged up to TXID %d (5)", l1, last)
	}
	if rec, _, err := lease.Read(ctx, store); err != nil || !rec.Released() {
		t.Fatalf("lease after Close = %+v (%v), want released", rec, err)
	}
}

// Once the lease is lost the database stops being the writer: the loss is
// reported once, the next ship is refused as fenced and nothing reaches
// the history, and Close writes nothing either.
func TestLeaseLossRefusesShipsAndIsReported(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	lost := make(chan error, 2)
	db, err := Open(ctx, path, Options{
		Name: "app", Logger: testLogger(t), Store: store, Lease: takeLease(t, store, "a"),
		OnLeaseLost: func(cause error) { lost <- cause },
	})
	if err != nil {
		t.Fatal(err)
	}
	a.exec("INSERT INTO t VALUES (1)")
	if _, err := db.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(lease.Record{Holder: "intruder", Epoch: 9, Expires: time.Now().Add(time.Hour)})
	if _, err := store.Put(ctx, lease.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-lost:
		if !errors.Is(cause, lease.ErrLost) {
			t.Fatalf("reported cause %v, want lease.ErrLost", cause)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the loss of the lease was not reported")
	}
	filesBefore := len(levels(t, store)[0])
	a.exec("INSERT INTO t VALUES (2)")
	if _, err := db.Sync(ctx); !errors.Is(err, engine.ErrFenced) {
		t.Fatalf("Sync after the loss = %v, want engine.ErrFenced", err)
	}
	a.exec("INSERT INTO t VALUES (3)")
	if err := db.Close(ctx, false); err != nil && !errors.Is(err, engine.ErrFenced) {
		t.Fatal(err)
	}
	if n := len(levels(t, store)[0]); n != filesBefore {
		t.Fatalf("level 0 holds %d files after the loss, want %d: a write reached the history", n, filesBefore)
	}
	if n := rowsInReplica(t, store); n != 1 {
		t.Fatalf("replica has %d rows, want the 1 shipped under the lease", n)
	}
	select {
	case cause := <-lost:
		t.Fatalf("loss reported twice (second: %v)", cause)
	case <-time.After(100 * time.Millisecond):
	}
	if rec, _, _ := lease.Read(ctx, store); rec.Holder != "intruder" {
		t.Fatalf("Close overwrote the new holder's lease: %+v", rec)
	}
}

// Close's own release of the lease is not reported as a loss.
func TestCloseIsNotALeaseLoss(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	newApp(t, path)
	lost := make(chan error, 1)
	db, err := Open(ctx, path, Options{Name: "app", Logger: testLogger(t), Store: store, Lease: takeLease(t, store, "a"),
		OnLeaseLost: func(cause error) { lost <- cause }})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-lost:
		t.Fatalf("Close reported a loss: %v", cause)
	case <-time.After(200 * time.Millisecond):
	}
}

// A stream ships a database another process writes until stopped, then
// ships the rest and releases the lease.
func TestStreamShipsUntilStoppedAndReleases(t *testing.T) {
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	var shipped shipLog
	s := NewStream(path, Options{Name: path, Logger: testLogger(t), Store: store, Lease: takeLease(t, store, "a"),
		Compaction: &Compaction{Config: compact.Config{}}, OnShip: shipped.add},
		StreamOptions{Interval: 20 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	for i := 0; i < 5; i++ {
		a.exec("INSERT INTO t VALUES (1)")
		time.Sleep(40 * time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Health().Pos.TXID < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	a.exec("INSERT INTO t VALUES (2)")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rowsInReplica(t, store); n != 6 {
		t.Fatalf("replica has %d rows, want 6", n)
	}
	if shipped.len() == 0 {
		t.Fatal("OnShip saw nothing")
	}
	if rec, _, err := lease.Read(context.Background(), store); err != nil || !rec.Released() {
		t.Fatalf("lease after Run = %+v (%v), want released", rec, err)
	}
}

// A stream whose lease is lost stops as fenced at its next ship (the
// sidecar then exits 3), and what it ships no longer reaches the history.
func TestStreamStopsFencedOnceTheLeaseIsLost(t *testing.T) {
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	lost := make(chan error, 1)
	s := NewStream(path, Options{Name: path, Logger: testLogger(t), Store: store, Lease: takeLease(t, store, "a"),
		OnLeaseLost: func(cause error) { lost <- cause }},
		StreamOptions{Interval: 20 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for s.Health().Pos.TXID < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	body, _ := json.Marshal(lease.Record{Holder: "intruder", Epoch: 9, Expires: time.Now().Add(time.Hour)})
	if _, err := store.Put(context.Background(), lease.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(3 * time.Second):
		t.Fatal("the loss of the lease was not reported")
	}
	a.exec("INSERT INTO t VALUES (1)")
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrFenced) {
			t.Fatalf("Run = %v, want engine.ErrFenced", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream kept running after its lease was lost")
	}
	if n := rowsInReplica(t, store); n != 0 {
		t.Fatalf("replica has %d rows, want none: the insert came after the loss", n)
	}
}
