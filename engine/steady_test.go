package engine

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A writer that never pauses, checkpointing (TRUNCATE and RESTART) on its
// own now and then, while the sidecar syncs and runs its own PASSIVE and
// TRUNCATE checkpoints: the sidecar must follow from the WAL alone, never by
// re-reading the whole database, and the replica must match exactly.
func TestContinuousWriterNeverForcesAFullRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := newStore(t)
	db := openDB(t, path, store, Options{CheckpointPages: 40, TruncatePages: 60})
	ctx := context.Background()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a.insert(1 + i%4)
			// A pause between transactions, as a real application has, gives
			// the sidecar's checkpoints a chance at the write lock.
			time.Sleep(100 * time.Microsecond)
			switch i % 97 {
			case 41:
				a.checkpoint("TRUNCATE")
			case 83:
				a.checkpoint("RESTART")
			}
		}
	}()
	deadline := time.Now().Add(4 * time.Second)
	syncs := 0
	for time.Now().Before(deadline) {
		if _, err := db.Sync(ctx); err != nil {
			t.Errorf("Sync: %v", err)
		}
		syncs++
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	must(t, db.Close(ctx))
	st := db.Stats()
	t.Logf("%d syncs, %d captures, %d frames, %d rows", syncs, st.Captures, st.Frames, a.n)
	if st.FullReads != 0 {
		t.Errorf("%d full reads of the database while the application wrote continuously; want 0", st.FullReads)
	}
	if st.Captures < 20 {
		t.Errorf("only %d captures in %d syncs", st.Captures, syncs)
	}
	assertReplicaEquals(t, store, path)
}
