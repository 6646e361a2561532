package follow

import (
	"context"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
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

// slowStore delays the GET of one key and counts the GETs of every key.
type slowStore struct {
	replica.Store
	slowKey string
	delay   time.Duration
	mu      sync.Mutex
	gets    map[string]int
}

func (s *slowStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	s.gets[key]++
	slow := key == s.slowKey
	s.mu.Unlock()
	if slow {
		time.Sleep(s.delay)
	}
	return s.Store.Get(ctx, key)
}

func (s *slowStore) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[key]
}

// Woken by a push naming several shipped files, a follower applies each as
// soon as it and those before it arrived: one slow GET holds up only the
// files after it, not those before. Woken by pushes, it asks the bucket
// for nothing past what they named (that "not yet" would delay the next
// push by a GET); woken without a TXID, it looks further, as a poll does.
func TestWakeAppliesEachFileAsItArrivesAndProbesNoFurther(t *testing.T) {
	l := newLeader(t)
	l.insert(1)
	l.ship()
	st := &slowStore{Store: l.store, delay: 700 * time.Millisecond, gets: map[string]int{}}
	f, err := Open(context.Background(), filepath.Join(t.TempDir(), "f.db"), st, Options{PollInterval: time.Hour, Logger: quiet()})
	must(t, err)
	defer f.Close()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()

	time.Sleep(300 * time.Millisecond) // Run's first poll, which probes, found nothing new
	at := f.Pos().TXID
	for range 4 {
		l.insert(1)
		l.ship()
	}
	slow := at + 3
	st.mu.Lock()
	st.slowKey = replica.LTXKey(0, slow, slow)
	st.mu.Unlock()
	woken := time.Now()
	f.Wake(uint64(at + 4))
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(t, f.WaitFor(wctx, at+2))
	if took := time.Since(woken); took >= st.delay {
		t.Fatalf("TXIDs %s-%s were applied %s after the wake: they waited for the slow fetch of %s", at+1, at+2, took, slow)
	}
	if pos := f.Pos().TXID; pos >= slow {
		t.Fatalf("applied up to %s before the slow file %s arrived", pos, slow)
	}
	must(t, f.WaitFor(wctx, at+4))
	time.Sleep(100 * time.Millisecond)
	next := replica.LTXKey(0, at+5, at+5)
	if n := st.count(next); n != 0 {
		t.Fatalf("woken by pushes up to %s, the follower asked the bucket for %s %d times", at+4, next, n)
	}
	if got, want := contentHash(t, f.Path()), contentHash(t, l.path); got != want {
		t.Fatal("the follower's copy differs from the leader's database")
	}

	// A wake without a TXID (the writer released its lease, the stream
	// ended) looks for what may have been shipped meanwhile.
	l.insert(1)
	l.ship()
	f.Wake(0)
	must(t, f.WaitFor(wctx, at+5))
	if n := st.count(next); n == 0 {
		t.Fatal("a wake without a TXID did not look for the next file")
	}
}

// pushStore counts the GETs in flight at once (each takes 20 ms), and
// runs onFirst at the first GET of firstKey.
type pushStore struct {
	replica.Store
	firstKey  string
	onFirst   func()
	once      sync.Once
	cur, most atomic.Int32
}

func (s *pushStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == s.firstKey {
		s.once.Do(s.onFirst)
	}
	n := s.cur.Add(1)
	defer s.cur.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(20 * time.Millisecond)
	return s.Store.Get(ctx, key)
}

// A poll that finds the next file by probing while pushes name many more
// (a follower behind a busy writer) fetches those at once again, rather
// than probing for them one GET after the other.
func TestAProbedFileLeavesThePushedOnesToBeFetchedAtOnce(t *testing.T) {
	l := newLeader(t)
	l.insert(1)
	l.ship()
	st := &pushStore{Store: l.store}
	f, err := Open(context.Background(), filepath.Join(t.TempDir(), "f.db"), st, Options{PollInterval: time.Hour, Logger: quiet()})
	must(t, err)
	defer f.Close()
	at := f.Pos().TXID
	for range 30 {
		l.insert(1)
		l.ship()
	}
	// The pushes arrive while the poll probes for the next file.
	st.firstKey = replica.LTXKey(0, at+1, at+1)
	st.onFirst = func() { f.Wake(uint64(at + 30)) }
	st.most.Store(0)
	n, err := f.Poll(context.Background())
	must(t, err)
	if n != 30 || f.Pos().TXID != at+30 {
		t.Fatalf("applied %d files to TXID %s, want 30 to %s", n, f.Pos().TXID, at+30)
	}
	if most := st.most.Load(); most < 4 {
		t.Fatalf("at most %d GETs at once: the pushed files were probed for one after the other", most)
	}
	if got, want := contentHash(t, f.Path()), contentHash(t, l.path); got != want {
		t.Fatal("the follower's copy differs from the leader's database")
	}
}
