package compact

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// gatedDeletes holds every Delete until gate closes; the first one then fails.
type gatedDeletes struct {
	replica.Store
	gate  chan struct{}
	calls atomic.Int32
}

func (s *gatedDeletes) Delete(ctx context.Context, keys ...string) error {
	n := s.calls.Add(1)
	<-s.gate
	if n == 1 {
		return errors.New("store busy")
	}
	return s.Store.Delete(ctx, keys...)
}

// With a Deleter, retention's deletes never hold a pass: passes go on while
// the store sits on a DELETE, and a delete that fails is retried by a later
// pass, so the bucket ends up holding exactly the files the index keeps.
func TestBackgroundDeletesNeverHoldAPassAndAreRetried(t *testing.T) {
	fs, _ := newStore(t)
	store := &gatedDeletes{Store: fs, gate: make(chan struct{})}
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 100)
	cfg := Config{Levels: []Level{{1, 10 * time.Second}, {2, time.Minute}}, L0Retention: 20 * time.Second,
		Deleter: NewDeleter(1, 64)}
	c := New(store, cfg, nil)
	rng := rand.New(rand.NewPCG(7, 8))
	now := t0
	run := func(from, to int) {
		done := make(chan error, 1)
		go func() {
			for i := from; i < to; i++ {
				now = t0.Add(time.Duration(i) * time.Second)
				if i > 0 {
					writeOnce(h, rng, i)
				}
				c.Notify(h.Ship(now))
				if err := c.CompactOnce(context.Background(), now); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("compaction passes waited for a DELETE the store is holding")
		}
	}
	run(0, 90)
	if store.calls.Load() == 0 {
		t.Fatal("90 s with a 20 s level-0 retention deleted nothing")
	}
	close(store.gate)
	run(90, 150)
	deadline := time.Now().Add(10 * time.Second)
	for {
		levels, err := replica.ListAllLTX(context.Background(), fs)
		if err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		same := true
		for l := range levels {
			same = same && len(levels[l]) == st.PerLevel[l]
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket holds %v files per level, the index %v: a failed delete was never retried", counts(levels), st.PerLevel)
		}
		now = now.Add(time.Second)
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	assertLatestRestored(t, fs, h, "")
}

func counts(levels [][]replica.LTXFile) []int {
	var out []int
	for _, l := range levels {
		out = append(out, len(l))
	}
	return out
}
