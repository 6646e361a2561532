package dbhost

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
)

// getCounter counts the reads of level-0 files once armed.
type getCounter struct {
	replica.Store
	armed atomic.Bool
	mu    sync.Mutex
	gets  map[string]int
}

func (s *getCounter) note(key string) {
	if !s.armed.Load() || !strings.Contains(key, replica.LTXLevelPrefix(0)) {
		return
	}
	s.mu.Lock()
	s.gets[key]++
	s.mu.Unlock()
}

func (s *getCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.note(key)
	return s.Store.Get(ctx, key)
}

func (s *getCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	s.note(key)
	return s.Store.GetRange(ctx, key, off, n)
}

func (s *getCounter) read() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k, n := range s.gets {
		keys = append(keys, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(keys)
	return keys
}

// A new lease holder restores the newest state, which reads and verifies
// every level-0 file the previous holder left unmerged (all of them when it
// crashed or, as here, had no compaction to merge them on its way out).
// Its first acknowledgement waits for the check of those files: it must
// not GET them again (one request per file on the hand-over's path), and
// every acknowledged write is restored.
func TestNewHolderDoesNotReadAgainWhatItsRestoreVerified(t *testing.T) {
	store := newMinIOStore(t)
	const rows = 40
	a := leasedHost(t, store, "a") // no compaction: level 0 stays unmerged, as after kill -9
	dbA, err := a.Get(context.Background(), DefaultDatabase)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dbA, "CREATE TABLE t(x)")
	for i := 0; i < rows; i++ {
		write(t, dbA, fmt.Sprintf("INSERT INTO t VALUES (%d)", i))
	}

	counted := &getCounter{Store: store, gets: map[string]int{}}
	restores := atomic.Int64{}
	b := newHost(t, counted, t.TempDir(), func(o *Options) {
		o.Lease = &lease.Options{Holder: "b", URL: "http://b", TTL: time.Second, Poll: 50 * time.Millisecond}
		// Compaction on, its merges far off: what reads level 0 after
		// the restore is the check before the first acknowledgement.
		o.Replication = EngineReplication(testLogger(t), &replicated.Compaction{Config: compact.Config{
			Levels: []compact.Level{{Level: 1, Interval: 24 * time.Hour}}, SnapshotInterval: 24 * time.Hour}})
		restore := o.Replication.Restore
		o.Replication.Restore = func(ctx context.Context, s replica.Store, path string) error {
			err := restore(ctx, s, path)
			restores.Add(1)
			counted.armed.Store(err == nil) // from here on, any read of a level-0 file is a second one
			return err
		}
	})
	if _, err := b.Get(context.Background(), DefaultDatabase); err == nil {
		t.Fatal("b opened the database while a holds its lease")
	}
	if err := a.Close(context.Background()); err != nil { // releases the lease: b takes it in the background
		t.Fatal(err)
	}
	dbB := getWithin(t, b, DefaultDatabase, 10*time.Second)
	write(t, dbB, fmt.Sprintf("INSERT INTO t VALUES (%d)", rows)) // acknowledged only once the unmerged files are checked
	counted.armed.Store(false)

	if n := restores.Load(); n != 1 {
		t.Fatalf("b restored %d times, want 1", n)
	}
	if again := counted.read(); len(again) > 0 {
		t.Errorf("the new holder read %d level-0 files again after its restore had verified them: %v", len(again), again)
	}
	restored := restoredCount(t, store, DefaultDatabase, "SELECT count(*) FROM t")
	t.Logf("acknowledged %d rows, restored %d", rows+1, restored)
	if restored != rows+1 {
		t.Fatalf("restored %d rows, want the %d acknowledged", restored, rows+1)
	}
}
