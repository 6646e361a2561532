package lease

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

const testTTL = time.Second

// stores runs fn on a file store and on a MinIO bucket.
func stores(t *testing.T, fn func(t *testing.T, store replica.Store)) {
	t.Run("file", func(t *testing.T) {
		s, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, s)
	})
	t.Run("minio", func(t *testing.T) { fn(t, minioStore(t)) })
}

func minioStore(t *testing.T) replica.Store {
	m := testenv.MinIO(t)
	s, err := replicaurl.Open(context.Background(), m.URL(m.NewBucket(t), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func opts(holder string) Options {
	return Options{Holder: holder, URL: "http://" + holder, TTL: testTTL, Poll: 50 * time.Millisecond}
}

// crash stops renewing without releasing, as kill -9 would.
func (l *Lease) crash() {
	close(l.stop)
	<-l.done
}

func TestAcquireRenewRelease(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		l, err := TryAcquire(ctx, store, opts("a"))
		if err != nil {
			t.Fatal(err)
		}
		first, _, err := Read(ctx, store)
		if err != nil || first.Holder != "a" || first.Epoch != 1 || first.URL != "http://a" {
			t.Fatalf("record after acquire = %+v, %v", first, err)
		}
		if _, err := TryAcquire(ctx, store, opts("b")); !errors.Is(err, ErrHeld) {
			t.Fatalf("second TryAcquire = %v, want ErrHeld", err)
		}
		time.Sleep(2 * testTTL) // several renewals
		if !l.Valid() {
			t.Fatalf("lease not valid after renewals: %v", l.Err())
		}
		now, _, _ := Read(ctx, store)
		if !now.Expires.After(first.Expires.Add(testTTL)) || now.Epoch != 1 {
			t.Fatalf("lease not renewed: first %+v now %+v", first, now)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if l.Valid() {
			t.Fatal("released lease still valid")
		}
		rel, _, _ := Read(ctx, store)
		if !rel.Released() || rel.Holder != "a" {
			t.Fatalf("record after release = %+v", rel)
		}
		l2, err := TryAcquire(ctx, store, opts("b"))
		if err != nil {
			t.Fatalf("take released lease: %v", err)
		}
		if l2.Record().Epoch != 2 {
			t.Fatalf("epoch after takeover = %d, want 2", l2.Record().Epoch)
		}
		l2.Release(ctx)
	})
}

func TestContendersExactlyOneWins(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		race := func(round string) *Lease {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var winners []*Lease
			for i := 0; i < 6; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := TryAcquire(ctx, store, opts(round+string(rune('a'+i))))
					if err == nil {
						mu.Lock()
						winners = append(winners, l)
						mu.Unlock()
					} else if !errors.Is(err, ErrHeld) {
						t.Errorf("contender %d: %v", i, err)
					}
				}()
			}
			wg.Wait()
			if len(winners) != 1 {
				t.Fatalf("%s: %d winners, want exactly 1", round, len(winners))
			}
			return winners[0]
		}
		w := race("create-") // PutIfAbsent
		w.crash()
		time.Sleep(testTTL + 50*time.Millisecond)
		w2 := race("takeover-") // PutIfMatch on the expired lease
		if w2.Record().Epoch != 2 {
			t.Fatalf("epoch = %d, want 2", w2.Record().Epoch)
		}
		w2.Release(ctx)
	})
}

func TestTakeoverOnlyAfterExpiry(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		a, err := TryAcquire(ctx, store, opts("a"))
		if err != nil {
			t.Fatal(err)
		}
		a.crash()
		rec := a.Record()
		var seen []Record
		b, err := Acquire(ctx, store, opts("b"), func(r Record) { seen = append(seen, r) })
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release(ctx)
		if time.Now().Before(rec.Expires) {
			t.Fatalf("b took the lease before a's expiry %s", rec.Expires)
		}
		if a.Valid() {
			t.Fatal("a still believes it may write after b took over")
		}
		if len(seen) == 0 || seen[0].Holder != "a" {
			t.Fatalf("b did not wait on a: %+v", seen)
		}
		if got := b.Record(); got.Epoch != 2 || got.Holder != "b" {
			t.Fatalf("b's record = %+v", got)
		}
	})
}

func TestReleaseHandsOverWithinASecond(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		o := opts("a")
		o.TTL = 10 * time.Second // a waiter must not rely on expiry
		a, err := TryAcquire(ctx, store, o)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lease, 1)
		go func() {
			ob := opts("b")
			ob.TTL, ob.Poll = 10*time.Second, 0 // default poll
			b, err := Acquire(ctx, store, ob, nil)
			if err != nil {
				t.Error(err)
			}
			got <- b
		}()
		time.Sleep(500 * time.Millisecond)
		released := time.Now()
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-got:
			if gap := time.Since(released); gap > time.Second {
				t.Errorf("waiter took the lease %s after the release, want < 1s", gap)
			}
			if b != nil {
				b.Release(ctx)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter did not take the released lease")
		}
	})
}

func TestHolderLosesWhenOverwritten(t *testing.T) {
	stores(t, func(t *testing.T, store replica.Store) {
		ctx := context.Background()
		a, err := TryAcquire(ctx, store, opts("a"))
		if err != nil {
			t.Fatal(err)
		}
		// An operator (or a split brain) replaces the lease behind a's back.
		body := encode(Record{Holder: "intruder", Epoch: 9, Expires: time.Now().Add(time.Hour)})
		if _, err := store.Put(ctx, Key, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Lost():
		case <-time.After(testTTL):
			t.Fatal("holder did not notice the lease was taken")
		}
		if a.Valid() || !errors.Is(a.Err(), ErrLost) {
			t.Fatalf("after loss: valid=%v err=%v", a.Valid(), a.Err())
		}
		if err := a.Release(ctx); err != nil {
			t.Fatalf("release of a lost lease: %v", err)
		}
		if rec, _, _ := Read(ctx, store); rec.Holder != "intruder" {
			t.Fatalf("release of a lost lease overwrote the new holder: %+v", rec)
		}
	})
}

// A holder cut off from the store stops writing before anyone else may take
// over (suspended, not lost), and resumes once the store is back, since a
// conditional replace proves nobody took the lease meanwhile.
func TestHolderStopsWhenStoreUnreachable(t *testing.T) {
	m := testenv.MinIO(t)
	store := minioStore(t)
	ctx := context.Background()
	a, err := TryAcquire(ctx, store, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	rec := a.Record()
	m.Stop()
	defer m.Start()
	for a.Valid() {
		time.Sleep(5 * time.Millisecond)
	}
	// The holder stopped before the stored expiry plus one renewal period:
	// the last renewal's expiry is at most rec.Expires + TTL.
	if time.Now().After(rec.Expires.Add(testTTL)) {
		t.Fatalf("stopped at %s, after the latest possible expiry %s", time.Now(), rec.Expires.Add(testTTL))
	}
	if !a.Suspended() {
		t.Fatalf("not valid but not suspended either: %v", a.Err())
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * testTTL); !a.Valid(); {
		if time.Now().After(deadline) {
			t.Fatalf("holder did not resume after MinIO came back: %v", a.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-a.Lost():
		t.Fatal("holder lost a lease nobody took")
	default:
	}
	if got := a.Record(); got.Epoch != rec.Epoch {
		t.Fatalf("epoch %d after resuming, want %d", got.Epoch, rec.Epoch)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 10*testTTL)
	defer cancel()
	b, err := Acquire(actx, store, opts("b"), nil)
	if err != nil {
		t.Fatalf("acquire after the release: %v", err)
	}
	b.Release(ctx)
}

// A suspended holder whose lease another instance took meanwhile learns it
// at its next renewal: lost, never resumed.
func TestSuspendedHolderLosesToANewHolder(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := TryAcquire(ctx, store, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	a.crash() // stops renewing, as a paused process would
	time.Sleep(time.Until(a.Record().Expires) + 10*time.Millisecond)
	b, err := TryAcquire(ctx, store, opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	if a.Valid() {
		t.Fatal("a is valid past its deadline")
	}
	a.mu.Lock()
	deadline := a.deadline
	a.mu.Unlock()
	if err := a.renew(deadline); !errors.Is(err, ErrLost) {
		t.Fatalf("renewal of a taken lease = %v, want ErrLost", err)
	}
}
