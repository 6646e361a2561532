package compact

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/restore/restoretest"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// countingStore counts requests by method.
type countingStore struct {
	replica.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *countingStore) count(m string) {
	s.mu.Lock()
	s.calls[m]++
	s.mu.Unlock()
}

func (s *countingStore) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

func (s *countingStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	s.count("PutIfAbsent")
	return s.Store.PutIfAbsent(ctx, k, r, n)
}
func (s *countingStore) Get(ctx context.Context, k string) (io.ReadCloser, error) {
	s.count("Get")
	return s.Store.Get(ctx, k)
}
func (s *countingStore) GetRange(ctx context.Context, k string, o, n int64) (io.ReadCloser, error) {
	s.count("GetRange")
	return s.Store.GetRange(ctx, k, o, n)
}
func (s *countingStore) Stat(ctx context.Context, k string) (replica.ObjectInfo, error) {
	s.count("Stat")
	return s.Store.Stat(ctx, k)
}
func (s *countingStore) Delete(ctx context.Context, keys ...string) error {
	s.count("Delete")
	return s.Store.Delete(ctx, keys...)
}
func (s *countingStore) List(ctx context.Context, p string) ([]replica.ObjectInfo, error) {
	s.count("List")
	return s.Store.List(ctx, p)
}

func newStore(t testing.TB) (*file.Store, *countingStore) {
	t.Helper()
	fs, err := file.New(filepath.Join(fastTempDir(t), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	return fs, &countingStore{Store: fs, calls: map[string]int{}}
}

// seedDB gives the database some size before the simulated writes.
func seedDB(h *restoretest.History, rows int) {
	h.Script(fmt.Sprintf(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)
		INSERT INTO t (v) SELECT 'seed ' || i || ' ' || hex(randomblob(60)) FROM n;`, rows))
}

// writeOnce is one second of the app's traffic: an insert and an update.
func writeOnce(h *restoretest.History, rng *rand.Rand, i int) {
	h.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprintf("write %d %x", i, rng.Uint64()))
	h.Exec("UPDATE t SET v = v || '.' WHERE id = ?", 1+rng.IntN(1000))
}

func restoreAt(t *testing.T, store replica.Store, opts restore.Options) (string, restore.Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	res, err := restore.Restore(context.Background(), store, out, opts)
	if err != nil {
		t.Fatalf("restore %+v: %v", opts, err)
	}
	return out, res
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	return int64(len(mustRead(t, path)))
}

// TestHourOfWritesStaysSmallAndRestorable simulates one hour of one write per
// second with the default configuration and a fake clock, then checks the
// footprint and restores the latest state and points inside the window.
func TestHourOfWritesStaysSmallAndRestorable(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, t.TempDir())
	h.SkipHashes = true
	seedDB(h, 40000)
	c := New(store, Config{}, nil)
	rng := rand.New(rand.NewPCG(1, 2))

	const seconds = 3600
	checkpoints := map[int]bool{600: true, 1800: true, 3300: true, 3590: true}
	for s := 0; s <= seconds; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		if s > 0 {
			writeOnce(h, rng, s)
		}
		c.Notify(h.Ship(now))
		if checkpoints[s] || s == seconds {
			h.RecordHash()
		}
		if err := c.CompactOnce(context.Background(), now.Add(200*time.Millisecond)); err != nil {
			t.Fatalf("second %d: %v", s, err)
		}
	}
	calls := store.snapshot()
	if calls["List"] != replica.MaxLevel+1 {
		t.Errorf("compactor LISTed %d times; want one per level at start (%d) and none in steady state", calls["List"], replica.MaxLevel+1)
	}

	levels, err := replica.ListAllLTX(context.Background(), fs)
	if err != nil {
		t.Fatal(err)
	}
	var objects int
	var bytes int64
	var perLevel []string
	for lvl, files := range levels {
		objects += len(files)
		var lb int64
		for _, f := range files {
			lb += f.Size
		}
		bytes += lb
		if len(files) > 0 {
			perLevel = append(perLevel, fmt.Sprintf("L%d=%d/%dKB", lvl, len(files), lb>>10))
		}
	}
	dbSize := fileSize(t, h.Path)
	t.Logf("after %d writes: %d objects (%s), %d bytes = %.2f× the %d-byte database; requests %v",
		seconds, objects, strings.Join(perLevel, " "), bytes, float64(bytes)/float64(dbSize), dbSize, calls)
	if st := c.Stats(); st.Objects != objects || st.Bytes != bytes {
		t.Errorf("compactor's index (%d objects, %d bytes) differs from the store's listing", st.Objects, st.Bytes)
	}
	if objects > 500 {
		t.Errorf("%d objects after an hour; want the low hundreds", objects)
	}
	if bytes > 3*dbSize {
		t.Errorf("%d bytes stored for a %d-byte database: more than 3×", bytes, dbSize)
	}

	out, res := restoreAt(t, fs, restore.Options{IntegrityCheck: true})
	if res.Pos.TXID != h.Pos().TXID || restoretest.FileHash(t, out) != h.Hashes[h.Pos().TXID] {
		t.Fatalf("latest restore reached TXID %d, not the exact state at %d", res.Pos.TXID, h.Pos().TXID)
	}
	if len(res.Files) > 12 {
		t.Errorf("latest restore needed %d files: %v", len(res.Files), res.Files)
	}
	for s := range checkpoints {
		txid := ltx.TXID(s + 1)
		at := h.Times[txid]
		out, res := restoreAt(t, fs, restore.Options{Timestamp: at})
		// Older points are only as fine as the coarsest level kept there.
		if res.Pos.TXID == txid {
			if restoretest.FileHash(t, out) != h.Hashes[txid] {
				t.Fatalf("restore at %s (TXID %d) is not exact", at, txid)
			}
		} else if res.Pos.TXID > txid || h.Times[res.Pos.TXID].After(at) {
			t.Fatalf("restore at %s gave TXID %d, after the target TXID %d", at, res.Pos.TXID, txid)
		}
		restoretest.IntegrityCheck(t, out, "t")
		t.Logf("point in time %v: TXID %d (target %d)", at.Sub(t0), res.Pos.TXID, txid)
	}
	// The last five minutes are kept per transaction.
	if _, res := restoreAt(t, fs, restore.Options{TXID: ltx.TXID(3591)}); res.Pos.TXID != 3591 {
		t.Fatalf("TXID 3591 not restorable")
	}
}
