package follow

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// A damaged next file is reported once, however many polls meet it, and
// the follower says when it moved past it (here: the object repaired).
func TestDamagedNextFileIsReportedOnceAndRecovered(t *testing.T) {
	ctx := context.Background()
	l := newLeader(t)
	l.insert(3)
	l.ship()
	path := filepath.Join(t.TempDir(), "follower.db")
	var mu sync.Mutex
	var damaged []string
	recovered := 0
	f, err := Open(ctx, path, l.store, Options{PollInterval: 2 * time.Millisecond, Logger: quiet(),
		OnDamage:    func(de *replica.DamageError) { mu.Lock(); damaged = append(damaged, de.Key); mu.Unlock() },
		OnRecovered: func() { mu.Lock(); recovered++; mu.Unlock() }})
	must(t, err)
	defer f.Close()

	l.insert(1)
	next := l.ship()
	rc, err := l.store.Get(ctx, next.Key)
	must(t, err)
	good, _ := io.ReadAll(rc)
	rc.Close()
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 1
	_, err = l.store.Put(ctx, next.Key, bytes.NewReader(bad), int64(len(bad)))
	must(t, err)

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.Run(rctx) }()
	time.Sleep(200 * time.Millisecond) // many polls
	mu.Lock()
	if len(damaged) != 1 || damaged[0] != next.Key {
		t.Errorf("reported %v, want [%s] once", damaged, next.Key)
	}
	mu.Unlock()
	_, err = l.store.Put(ctx, next.Key, bytes.NewReader(good), int64(len(good)))
	must(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		r := recovered
		mu.Unlock()
		if r > 0 && f.Pos().TXID == next.MaxTXID {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if f.Pos().TXID != next.MaxTXID || recovered != 1 {
		t.Fatalf("follower at TXID %d (want %d), recovered %d times (want 1)", f.Pos().TXID, next.MaxTXID, recovered)
	}
}
