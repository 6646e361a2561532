package follow

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// A follower that polls hourly applies a shipped file as soon as it is
// woken, and a wake with nothing new in the bucket applies nothing.
func TestWakeFetchesTheNextFileNow(t *testing.T) {
	l := newLeader(t)
	l.insert(1)
	l.ship()
	f, err := Open(context.Background(), filepath.Join(t.TempDir(), "f.db"), l.store, Options{PollInterval: time.Hour, Logger: quiet()})
	must(t, err)
	defer f.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()

	at := f.Pos().TXID
	f.Wake(uint64(at) + 5) // nothing new: a hint the bucket does not back applies nothing
	time.Sleep(50 * time.Millisecond)
	if pos := f.Pos().TXID; pos != at {
		t.Fatalf("a wake with nothing new moved the follower from %s to %s", at, pos)
	}
	for i := 0; i < 3; i++ {
		l.insert(1)
		l.ship()
		f.Wake(0)
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		must(t, f.WaitFor(wctx, l.db.Pos().TXID))
		cancel()
	}
	if st := f.Stats(); st.Applied != 3 {
		t.Fatalf("applied %d files after 3 wakes, want 3", st.Applied)
	}
}

// Told that several files are shipped, a follower fetches them at once and
// applies them in order; a hint past what the bucket holds applies exactly
// what it holds.
func TestWakeWithAHintAppliesEveryShippedFileInOrder(t *testing.T) {
	l := newLeader(t)
	l.insert(1)
	l.ship()
	f, err := Open(context.Background(), filepath.Join(t.TempDir(), "f.db"), l.store, Options{PollInterval: time.Hour, Logger: quiet()})
	must(t, err)
	defer f.Close()
	for i := 0; i < 20; i++ {
		l.insert(3)
		l.ship()
	}
	want := l.db.Pos().TXID
	f.Wake(uint64(want) + 100) // claims more than the bucket holds
	n, err := f.Poll(context.Background())
	must(t, err)
	if n != 20 || f.Pos().TXID != want {
		t.Fatalf("applied %d files to TXID %s, want 20 to %s", n, f.Pos().TXID, want)
	}
	if got, wantHash := contentHash(t, f.Path()), contentHash(t, l.path); got != wantHash {
		t.Fatal("the follower's copy differs from the leader's database after applying the prefetched files")
	}
}
