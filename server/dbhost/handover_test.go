package dbhost

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// getCounter counts the reads of each level-0 file while armed, and
// apart those after a restore.
type getCounter struct {
	replica.Store
	armed, restored atomic.Bool
	mu              sync.Mutex
	all, after      map[string]int
}

func newGetCounter(s replica.Store) *getCounter {
	return &getCounter{Store: s, all: map[string]int{}, after: map[string]int{}}
}

func (s *getCounter) note(key string) {
	if !s.armed.Load() || !strings.Contains(key, replica.LTXLevelPrefix(0)) {
		return
	}
	s.mu.Lock()
	s.all[key]++
	if s.restored.Load() {
		s.after[key]++
	}
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

// counts returns a copy of the counts since armed, and of those after the restore.
func (s *getCounter) counts() (all, after map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.all), maps.Clone(s.after)
}

func listed(m map[string]int) []string {
	var keys []string
	for k, n := range m {
		keys = append(keys, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(keys)
	return keys
}

// A new lease holder restores the newest state, which reads and verifies
// every level-0 file the previous holder left unmerged (all of them when it
// crashed or, as here, had no compaction to merge them on its way out).
// Its first acknowledgement waits for the check of those files: it must
// not GET them again (one request per file on the hand-over's path), nor
// read them for a cold open's view no write can use: from the release to
// its first acknowledged write it reads no level-0 file more often than a
// restore alone does. Every acknowledged write is restored.
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

	counted := newGetCounter(store)
	restores := atomic.Int64{}
	b := newHost(t, counted, t.TempDir(), func(o *Options) {
		o.Lease = &lease.Options{Holder: "b", URL: "http://b", TTL: time.Second, Poll: 50 * time.Millisecond}
		o.ColdOpen = &coldopen.Options{} // on, as in serve: a database only in the bucket may be cold-opened
		// Compaction on, its merges far off: what reads level 0 after
		// the restore is the check before the first acknowledgement.
		o.Replication = EngineReplication(testLogger(t), &replicated.Compaction{Config: compact.Config{
			Levels: []compact.Level{{Level: 1, Interval: 24 * time.Hour}}, SnapshotInterval: 24 * time.Hour}})
		restore := o.Replication.Restore
		o.Replication.Restore = func(ctx context.Context, s replica.Store, path string) error {
			err := restore(ctx, s, path)
			restores.Add(1)
			counted.restored.Store(err == nil) // from here on, any read of a level-0 file is a second one
			return err
		}
	})
	// b is asked for the database while a holds it: it may answer reads
	// on demand, but a write is refused, and b waits for the lease.
	if db, err := b.Get(context.Background(), DefaultDatabase); err == nil {
		if _, err := db.Write(context.Background(), func(sqlconn.Conn) error { return nil }); err == nil {
			t.Fatal("b wrote while a holds the lease")
		}
	}
	counted.armed.Store(true)
	if err := a.Close(context.Background()); err != nil { // releases the lease: b takes it in the background
		t.Fatal(err)
	}
	dbB := getWithin(t, b, DefaultDatabase, 10*time.Second)
	write(t, dbB, fmt.Sprintf("INSERT INTO t VALUES (%d)", rows)) // acknowledged only once the unmerged files are checked
	counted.armed.Store(false)
	all, after := counted.counts()

	if n := restores.Load(); n != 1 {
		t.Fatalf("b restored %d times, want 1", n)
	}
	if len(after) > 0 {
		t.Errorf("the new holder read %d level-0 files again after its restore had verified them: %v", len(after), listed(after))
	}
	// What one restore of the state b took over reads, file by file.
	var took ltx.TXID
	for k := range all {
		if _, _, hi, err := replica.ParseLTXKey(strings.TrimPrefix(k, DefaultDatabase+"/")); err == nil {
			took = max(took, hi)
		}
	}
	ref := newGetCounter(replica.Sub(store, DefaultDatabase))
	ref.armed.Store(true)
	res, err := restore.Restore(context.Background(), ref, filepath.Join(t.TempDir(), "ref.db"), restore.Options{TXID: took})
	if err != nil {
		t.Fatal(err)
	}
	refAll, _ := ref.counts()
	var more []string
	total := 0
	for k, n := range all {
		total += n
		if n > refAll[strings.TrimPrefix(k, DefaultDatabase+"/")] {
			more = append(more, fmt.Sprintf("%s x%d", k, n))
		}
	}
	sort.Strings(more)
	t.Logf("hand-over read %d level-0 objects in %d requests; one restore of %d files: %d requests",
		len(all), total, len(res.Files), sumOf(refAll))
	if len(more) > 0 {
		t.Errorf("the new holder read %d level-0 files more often than one restore does: %v", len(more), more)
	}
	restored := restoredCount(t, store, DefaultDatabase, "SELECT count(*) FROM t")
	t.Logf("acknowledged %d rows, restored %d", rows+1, restored)
	if restored != rows+1 {
		t.Fatalf("restored %d rows, want the %d acknowledged", restored, rows+1)
	}
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
