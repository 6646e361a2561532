package compact

import (
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// orderStore records the order in which databases' compactors first reach
// the store (a first pass lists it).
type orderStore struct {
	replica.Store
	name  string
	mu    *sync.Mutex
	order *[]string
}

func (s orderStore) List(ctx context.Context, p string) ([]replica.ObjectInfo, error) {
	s.mu.Lock()
	if n := len(*s.order); n == 0 || (*s.order)[n-1] != s.name {
		*s.order = append(*s.order, s.name)
	}
	s.mu.Unlock()
	return s.Store.List(ctx, p)
}

// shipped makes a replica with n level-0 files after a first full one, and a
// compactor told about them.
func shipped(t *testing.T, dir string, n int, wrap func(replica.Store) replica.Store) (*Compactor, *file.Store, *restoretest.History) {
	t.Helper()
	fs, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, fs, t.TempDir())
	h.SkipHashes = true
	seedDB(h, 10)
	c := New(wrap(fs), Config{}, nil)
	c.Notify(h.Ship(time.Now()))
	rng := rand.New(rand.NewPCG(uint64(n), 9))
	for i := 1; i <= n; i++ {
		writeOnce(h, rng, i)
		c.Notify(h.Ship(time.Now()))
	}
	return c, fs, h
}

// With one worker, the compactor with the largest level-0 backlog runs
// first, and every registered compactor gets its pass.
func TestSchedulerRunsTheLargestBacklogFirst(t *testing.T) {
	var mu sync.Mutex
	var order []string
	s := newScheduler(1)
	root := fastTempDir(t)
	for _, db := range []struct {
		name string
		n    int
	}{{"small", 3}, {"large", 40}, {"medium", 12}} {
		c, _, _ := shipped(t, root+"/"+db.name, db.n, func(st replica.Store) replica.Store {
			return orderStore{Store: st, name: db.name, mu: &mu, order: &order}
		})
		s.Add(db.name, c)
	}
	s.start()
	defer s.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(order, ",")
		mu.Unlock()
		if got == "large,medium,small" {
			break
		}
		if len(got) > len("large,medium,small") || time.Now().After(deadline) {
			t.Fatalf("compactors ran in the order %q; want large,medium,small", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "the three passes", func() bool { st := s.Stats(); return st.Passes >= 3 && st.Running == 0 })
	if st := s.Stats(); st.Backlog != 0 || st.Compactors != 3 {
		t.Fatalf("after the first passes: %+v; want 3 compactors and no level-0 backlog", st)
	}
}

// Waiting doubles a compactor's priority every level-1 interval: a single
// waiting file overtakes a fresh full backlog within a few intervals, so a
// busy database cannot starve a quiet one.
func TestSchedulerPriorityAgesSoNothingStarves(t *testing.T) {
	l1 := DefaultLevels[0].Interval
	busy := priority(DefaultL0Trigger, 0, l1)
	if priority(1, 0, l1) >= busy {
		t.Fatal("a single file outranks a full backlog that just became due")
	}
	if priority(1, 8*l1, l1) <= busy {
		t.Fatalf("a single file waiting %s still ranks below a fresh backlog of %d", 8*l1, DefaultL0Trigger)
	}
	if p := priority(100000, 1000*time.Hour, l1); p <= 0 || p != p || p > 1e300 {
		t.Fatalf("priority after a very long wait is %v; want a finite positive number", p)
	}
}

// A released compactor's level-0 files are merged into level 1 by the
// scheduler, without the caller waiting, and the compactor is then
// forgotten; one released with nothing to merge is forgotten at once.
func TestSchedulerFlushesReleasedCompactorsThenForgetsThem(t *testing.T) {
	s := NewScheduler(2, nil)
	defer s.Stop()
	root := fastTempDir(t)
	same := func(st replica.Store) replica.Store { return st }
	c, fs, h := shipped(t, root+"/busy", 20, same)
	idle, _, _ := shipped(t, root+"/idle", 0, same)
	releaseIdle := s.Add("idle", idle)
	release := s.Add("busy", c)
	waitFor(t, "first passes", func() bool { return !c.NextDue().IsZero() && !idle.NextDue().IsZero() })
	rng := rand.New(rand.NewPCG(10, 11))
	for i := 0; i < 5; i++ {
		writeOnce(h, rng, 100+i)
		c.Notify(h.Ship(time.Now()))
	}
	if n, _ := c.Backlog(); n != 5 {
		t.Fatalf("backlog %d after 5 new files; want 5", n)
	}
	start := time.Now()
	releaseIdle(true)
	release(true)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("release waited %s for a pass", d)
	}
	waitFor(t, "released compactors forgotten", func() bool { return s.Stats().Compactors == 0 })
	levels, err := replica.ListAllLTX(context.Background(), fs)
	if err != nil {
		t.Fatal(err)
	}
	var l1 ltx.TXID
	for _, f := range levels[1] {
		l1 = max(l1, f.MaxTXID)
	}
	if l1 != h.Pos().TXID {
		t.Fatalf("level 1 reaches TXID %s after the flush; want the newest, %s", l1, h.Pos().TXID)
	}
}

// Stop cancels a pass in flight (here one stuck on a store that never
// answers) and returns at once; nothing runs afterwards.
func TestSchedulerStopCancelsPassesInFlight(t *testing.T) {
	s := NewScheduler(1, nil)
	dir := fastTempDir(t)
	c, _, _ := shipped(t, dir, 5, func(st replica.Store) replica.Store { return hungStore{st} })
	c.cfg.CallTimeout = time.Hour
	s.Add("hung", c)
	waitFor(t, "the pass to start", func() bool { return s.Stats().Running == 1 })
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Stop took %s with a pass in flight", d)
	}
	if st := s.Stats(); st.Compactors != 0 || st.Running != 0 {
		t.Fatalf("after Stop: %+v", st)
	}
	release := s.Add("later", c)
	release(true)
	if st := s.Stats(); st.Compactors != 0 {
		t.Fatalf("Add after Stop registered a compactor: %+v", st)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A pass stuck on a store that never answers ends at its deadline and gives
// its worker back: with a single worker, another database still compacts.
func TestSchedulerPassDeadlineFreesTheWorker(t *testing.T) {
	s := newScheduler(1)
	s.passTimeout = 300 * time.Millisecond
	root := fastTempDir(t)
	hung, _, _ := shipped(t, root+"/hung", 40, func(st replica.Store) replica.Store { return hungStore{st} })
	hung.cfg.CallTimeout = time.Hour
	ok, _, _ := shipped(t, root+"/ok", 3, func(st replica.Store) replica.Store { return st })
	s.Add("hung", hung) // the larger backlog: it runs first
	s.Add("ok", ok)
	s.start()
	defer s.Stop()
	waitFor(t, "the healthy database's pass", func() bool { return !ok.NextDue().IsZero() })
	if hung.NextDue().IsZero() {
		s.mu.Lock()
		retry := s.jobs["hung"].retryAt
		s.mu.Unlock()
		if retry.IsZero() {
			t.Fatal("the stuck pass ended without a backoff before its retry")
		}
	}
}

// Releasing without a flush (a replica about to be purged or handed over)
// cancels the pass in flight and returns only once it has ended, so nothing
// of that compactor writes afterwards.
func TestSchedulerReleaseWithoutFlushEndsThePassFirst(t *testing.T) {
	s := NewScheduler(1, nil)
	defer s.Stop()
	c, _, _ := shipped(t, fastTempDir(t), 5, func(st replica.Store) replica.Store { return hungStore{st} })
	c.cfg.CallTimeout = time.Hour
	release := s.Add("purged", c)
	waitFor(t, "the pass to start", func() bool { return s.Stats().Running == 1 })
	start := time.Now()
	release(false)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("release took %s", d)
	}
	if st := s.Stats(); st.Compactors != 0 || st.Running != 0 {
		t.Fatalf("after release without flush: %+v; want nothing registered or running", st)
	}
}

// More than L0Trigger level-0 files make a compactor due at once, long
// before its next clock boundary.
func TestSchedulerRunsAPassWhenLevelZeroPassesTheTrigger(t *testing.T) {
	s := NewScheduler(1, nil)
	defer s.Stop()
	c, _, h := shipped(t, fastTempDir(t), 0, func(st replica.Store) replica.Store { return st })
	c.cfg.Levels = []Level{{1, 24 * time.Hour}} // no boundary during the test
	c.cfg.SnapshotInterval = 24 * time.Hour
	c.cfg.L0Trigger = 4
	s.Add("db", c)
	waitFor(t, "the first pass", func() bool { return !c.NextDue().IsZero() })
	due := c.NextDue()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3; i++ {
		writeOnce(h, rng, i)
		c.Notify(h.Ship(time.Now()))
	}
	time.Sleep(2500 * time.Millisecond) // more than two ticks: under the trigger, nothing runs
	if n, _ := c.Backlog(); n != 3 {
		t.Fatalf("backlog %d with 3 files under a trigger of 4; want them left for the boundary", n)
	}
	for i := 3; i < 6; i++ {
		writeOnce(h, rng, i)
		c.Notify(h.Ship(time.Now()))
	}
	waitFor(t, "the triggered pass", func() bool { n, _ := c.Backlog(); return n == 0 })
	if time.Now().After(due) {
		t.Fatalf("the pass ran after the boundary at %s; the trigger should have run it before", due)
	}
}

// activeGets counts the objects open for reading (from Get to Close).
type activeGets struct {
	replica.Store
	n *atomic.Int32
}

func (s activeGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	s.n.Add(1)
	return countedBody{rc, s.n}, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int32
}

func (b countedBody) Close() error {
	b.n.Add(-1)
	return b.ReadCloser.Close()
}

// A database reopened while its old compactor's pass is in flight: Add
// cancels that pass and registers the new compactor only once it has ended,
// so two compactors never work on one replica at once.
func TestSchedulerReopenWaitsForTheOldPass(t *testing.T) {
	s := NewScheduler(2, nil)
	defer s.Stop()
	var active atomic.Int32
	dir := fastTempDir(t)
	old, fs, _ := shipped(t, dir, 5, func(st replica.Store) replica.Store { return activeGets{hungStore{st}, &active} })
	old.cfg.CallTimeout = time.Hour
	s.Add("db", old)
	waitFor(t, "the old pass to read", func() bool { return active.Load() > 0 })
	fresh := New(fs, Config{}, nil)
	s.Add("db", fresh)
	if n := active.Load(); n != 0 {
		t.Fatalf("%d reads of the old compactor still in flight after the new one was added", n)
	}
	waitFor(t, "the new compactor's first pass", func() bool { return !fresh.NextDue().IsZero() })
	if st := s.Stats(); st.Compactors != 1 {
		t.Fatalf("%d compactors registered for one database; want 1", st.Compactors)
	}
}
