package replicated

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replica"
)

// damageLog records what a DamageReporter hears.
type damageLog struct {
	mu      sync.Mutex
	damaged []string
	healed  []string
}

func (d *damageLog) Damaged(db string, err *replica.DamageError) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.damaged = append(d.damaged, err.Key)
}

func (d *damageLog) Healed(db, snapshot string, took time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.healed = append(d.healed, snapshot)
}

// A level-0 object flipped while the writer was stopped: the first Sync
// after the reopen returns only once a snapshot of the local database
// covers its TXID, so the write it acknowledges is restorable; the damage
// is reported once, healed once, and the object moved aside.
func TestDamagedReplicaIsHealedBeforeTheNextAcknowledgement(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	db, err := Open(ctx, path, Options{Name: "app", Logger: testLogger(t), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for range 10 {
		a.exec("INSERT INTO t VALUES (1)")
		rows++
		if _, err := db.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	l0 := levels(t, store)[0]
	victim := l0[len(l0)/2]
	rc, err := store.Get(ctx, victim.Key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(rc)
	rc.Close()
	body[len(body)/2] ^= 0x40
	if _, err := store.Put(ctx, victim.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}

	var dl damageLog
	db, err = Open(ctx, path, Options{Name: "app", Logger: testLogger(t), Store: store, Damage: &dl,
		Compaction: &Compaction{Config: compact.Config{Levels: []compact.Level{{Level: 1, Interval: time.Hour}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx, true)
	a.exec("INSERT INTO t VALUES (2)")
	rows++
	pos, err := db.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var snap replica.LTXFile
	for _, f := range levels(t, store)[replica.SnapshotLevel] {
		snap = f
	}
	// The heal may start as soon as the reopen finds the damage, before this
	// write: a snapshot past the damaged object is what makes TXID pos
	// restorable (with the level-0 files above it), as the restore below shows.
	if snap.MaxTXID < victim.MaxTXID {
		t.Fatalf("Sync acknowledged TXID %d with no snapshot past the damaged %s (newest: %+v)", pos.TXID, victim.Key, snap)
	}
	if n := rowsInReplica(t, store); n != rows {
		t.Fatalf("latest restore holds %d rows, want %d", n, rows)
	}
	dl.mu.Lock()
	damaged, healed := append([]string(nil), dl.damaged...), append([]string(nil), dl.healed...)
	dl.mu.Unlock()
	if len(damaged) != 1 || damaged[0] != victim.Key || len(healed) != 1 || healed[0] != snap.Key {
		t.Fatalf("reported damaged %v healed %v; want [%s] and [%s]", damaged, healed, victim.Key, snap.Key)
	}
	// Moved aside: copied under DamagedPrefix, then deleted (two requests,
	// so the copy shows before the delete is done).
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, copied := store.Stat(ctx, compact.DamagedPrefix+victim.Key)
		_, still := store.Stat(ctx, victim.Key)
		if copied == nil && still != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not moved aside (copy: %v; still in the LTX tree: %v)", victim.Key, copied == nil, still == nil)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Later writes go on as usual.
	a.exec("INSERT INTO t VALUES (3)")
	rows++
	if _, err := db.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rowsInReplica(t, store); n != rows {
		t.Fatalf("latest restore holds %d rows, want %d", n, rows)
	}
}

// The sidecar heals too: a stream whose compaction meets a damaged level-0
// object left by an earlier run uploads a snapshot on its own.
func TestStreamHealsADamagedReplica(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	db, err := Open(ctx, path, Options{Name: "app", Logger: testLogger(t), Store: store})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		a.exec("INSERT INTO t VALUES (1)")
		if _, err := db.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	l0 := levels(t, store)[0]
	victim := l0[len(l0)/2]
	if err := store.Delete(ctx, victim.Key); err != nil {
		t.Fatal(err)
	}
	var dl damageLog
	s := NewStream(path, Options{Name: "app", Logger: testLogger(t), Store: store, Damage: &dl,
		Compaction: &Compaction{Config: compact.Config{}}}, StreamOptions{Interval: 20 * time.Millisecond})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(rctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		dl.mu.Lock()
		n := len(dl.healed)
		dl.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heal within 10 s of a missing %s", victim.Key)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.exec("INSERT INTO t VALUES (2)")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rowsInReplica(t, store); n != 7 {
		t.Fatalf("replica restores %d rows, want 7", n)
	}
}
