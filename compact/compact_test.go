package compact

import (
	"context"
	"errors"
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

// seedDB gives the database some size before the simulated writes: rows of
// application-like JSON with a random token (LZ4 compresses them about 2×).
func seedDB(h *restoretest.History, rows int) {
	h.Script(fmt.Sprintf(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d)
		INSERT INTO t (v) SELECT json_object('user', i, 'name', 'user-' || i, 'plan', 'basic', 'tags', json_array('a', 'b'), 'token', hex(randomblob(8))) FROM n;`, rows))
}

// shippedHistory seeds a database of seedRows rows and ships it, then ships
// writes single-transaction files, all at one instant (returned), with a
// random source seeded by seed (returned, for later writes).
func shippedHistory(t *testing.T, fs replica.Store, seedRows, writes int, seed uint64) (*restoretest.History, *rand.Rand, time.Time) {
	t.Helper()
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, seedRows)
	now := t0.Truncate(time.Hour).Add(time.Second)
	h.Ship(now)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := 1; i <= writes; i++ {
		writeOnce(h, rng, i)
		h.Ship(now)
	}
	return h, rng, now
}

// writeOnce is one second of the app's traffic: an insert, and every other
// second an update of an older row.
func writeOnce(h *restoretest.History, rng *rand.Rand, i int) {
	h.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprintf(`{"user":%d,"name":"user-%d","plan":"pro","tags":["c"],"token":"%X"}`, i, i, rng.Uint64()))
	if i%2 == 1 {
		h.Exec("UPDATE t SET v = json_set(v, '$.plan', 'pro') WHERE id = ?", 1+rng.IntN(1000))
	}
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
	h := restoretest.New(t, fs, fastTempDir(t))
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

// settle runs passes far enough ahead that every deletion and compaction the
// history made due has happened.
func settle(t *testing.T, c *Compactor, from time.Time) time.Time {
	t.Helper()
	now := from
	for i := 0; i < 60; i++ {
		now = now.Add(time.Hour)
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	return now
}

func TestIdleCompactorMakesNoRequests(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 200)
	c := New(store, Config{}, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	now := t0
	for i := 0; i < 120; i++ {
		now = now.Add(time.Second)
		writeOnce(h, rng, i)
		c.Notify(h.Ship(now))
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	now = settle(t, c, now)
	before := store.snapshot()
	for i := 0; i < 500; i++ {
		now = now.Add(17 * time.Second)
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	if after := store.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("idle passes made requests: before %v, after %v", before, after)
	}
	st := c.Stats()
	if st.Objects > 3 {
		t.Errorf("settled replica still holds %d objects: %v", st.Objects, st.PerLevel)
	}
	out, res := restoreAt(t, fs, restore.Options{})
	if res.Pos.TXID != h.Pos().TXID || restoretest.FileHash(t, out) != h.Hashes[h.Pos().TXID] {
		t.Fatal("settled replica does not restore the latest state exactly")
	}
	// A new file wakes it up again.
	writeOnce(h, rng, 999)
	c.Notify(h.Ship(now))
	if err := c.CompactOnce(context.Background(), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if after := store.snapshot(); after["PutIfAbsent"] == before["PutIfAbsent"] {
		t.Fatal("a notified file was not compacted")
	}
}

func TestRetentionWindowDeletesOldSnapshotsButKeepsTheWindow(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 300)
	cfg := Config{Levels: []Level{{1, 10 * time.Second}, {2, time.Minute}}, SnapshotInterval: 2 * time.Minute,
		Retention: 5 * time.Minute, L0Retention: 20 * time.Second}
	c := New(store, cfg, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	now := t0
	for i := 0; i < 900; i++ { // 15 minutes
		now = t0.Add(time.Duration(i) * time.Second)
		if i > 0 {
			writeOnce(h, rng, i)
		}
		c.Notify(h.Ship(now))
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	snaps, err := replica.ListLTX(context.Background(), fs, replica.SnapshotLevel)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) < 2 || len(snaps) > 5 {
		t.Fatalf("%d snapshots after 15 minutes with a 2-minute interval and a 5-minute window: %v", len(snaps), snaps)
	}
	if snaps[0].MaxTXID == 1 {
		t.Fatalf("the first snapshot (TXID 1) is far outside the window but was kept: %v", snaps)
	}
	// Inside the window: restorable. Well before it: gone.
	at := now.Add(-4 * time.Minute)
	_, res := restoreAt(t, fs, restore.Options{Timestamp: at})
	if got := h.Times[res.Pos.TXID]; got.After(at) || at.Sub(got) > time.Minute {
		t.Fatalf("restore at now-4m reached TXID %d written at %s", res.Pos.TXID, got)
	}
	if _, err := restore.Restore(context.Background(), fs, filepath.Join(t.TempDir(), "x.db"), restore.Options{Timestamp: t0.Add(time.Minute)}); err == nil {
		t.Fatal("a point 14 minutes old is outside the 5-minute window and should no longer be restorable")
	}
	h.RecordHash()
	out, res := restoreAt(t, fs, restore.Options{IntegrityCheck: true})
	if res.Pos.TXID != h.Pos().TXID || restoretest.FileHash(t, out) != h.Hashes[h.Pos().TXID] {
		t.Fatal("latest state not restored exactly")
	}
}

func TestCompactsLitestreamStyleReplica(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	h.NoChecksum = true // as Litestream 0.5 writes them
	seedDB(h, 300)
	c := New(store, Config{}, nil)
	rng := rand.New(rand.NewPCG(7, 8))
	var now time.Time
	for i := 0; i < 400; i++ {
		now = t0.Add(time.Duration(i) * time.Second)
		if i > 0 {
			writeOnce(h, rng, i)
		}
		h.Ship(now) // no Notify: the compactor finds them by listing, as with Litestream's files
		if i%50 == 0 || i == 399 {
			c2 := New(store, Config{}, nil)
			if err := c2.CompactOnce(context.Background(), now); err != nil {
				t.Fatal(err)
			}
			c = c2
		}
	}
	now = now.Add(time.Hour)
	if err := c.CompactOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	snaps, err := replica.ListLTX(context.Background(), fs, replica.SnapshotLevel)
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot written: %v", err)
	}
	newest := snaps[len(snaps)-1]
	data := readAll(t, fs, newest.Key)
	dec := ltx.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Verify(); err != nil {
		t.Fatalf("snapshot %s does not verify: %v", newest.Key, err)
	}
	if !dec.Header().NoChecksum() || dec.Trailer().PostApplyChecksum != 0 {
		t.Fatalf("snapshot %s carries a rolling checksum: Litestream 0.5.17's restore would reject it", newest.Key)
	}
	h.RecordHash()
	out, res := restoreAt(t, fs, restore.Options{IntegrityCheck: true})
	if res.Pos.TXID != h.Pos().TXID || restoretest.FileHash(t, out) != h.Hashes[h.Pos().TXID] {
		t.Fatal("latest state not restored exactly")
	}
}

func TestTwoCompactorsOnOneReplicaAdoptEachOthersWork(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 300)
	a, b := New(store, Config{}, nil), New(fs, Config{}, nil)
	rng := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 100; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		if i > 0 {
			writeOnce(h, rng, i)
		}
		f := h.Ship(now)
		a.Notify(f)
		b.Notify(f)
		for _, c := range []*Compactor{a, b} {
			if err := c.CompactOnce(context.Background(), now); err != nil {
				t.Fatalf("second %d: %v", i, err)
			}
		}
	}
	if a.Stats().Objects != b.Stats().Objects {
		t.Fatalf("compactors disagree: %v vs %v", a.Stats(), b.Stats())
	}
	assertLatestRestored(t, fs, h, "")
}

func TestInvalidLevelsFailEveryPass(t *testing.T) {
	_, store := newStore(t)
	c := New(store, Config{Levels: []Level{{2, time.Minute}}}, nil)
	if err := c.CompactOnce(context.Background(), t0); err == nil || !strings.Contains(err.Error(), "numbered 1, 2") {
		t.Fatalf("want a level numbering error, got %v", err)
	}
	if calls := store.snapshot(); len(calls) != 0 {
		t.Fatalf("invalid config made requests: %v", calls)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 10)
	c := New(store, Config{}, nil)
	c.Notify(h.Ship(time.Now()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().PerLevel[replica.SnapshotLevel] == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v on cancel", err)
	}
	if c.Stats().PerLevel[replica.SnapshotLevel] != 1 {
		t.Fatal("Run never wrote the first snapshot")
	}
}

// A stopping sidecar bounds the level 0 it merges: above the bound Flush
// writes nothing (the process would be killed part-way), below it merges.
func TestFlushLeavesALevelZeroAboveItsBound(t *testing.T) {
	fs, _ := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	h.Exec("CREATE TABLE t (v TEXT)")
	c := New(fs, Config{}, nil)
	var waiting int64
	for i := 0; i < 10; i++ {
		h.Exec(fmt.Sprintf("INSERT INTO t (v) VALUES ('row %d')", i))
		f := h.Ship(t0)
		waiting += f.Size
		c.Notify(f)
	}
	err := c.Flush(context.Background(), t0, waiting-1)
	if !errors.Is(err, ErrFlushTooLarge) {
		t.Fatalf("Flush over its bound returned %v, want ErrFlushTooLarge", err)
	}
	if n := c.Stats().PerLevel[1]; n != 0 {
		t.Fatalf("Flush over its bound wrote %d level-1 files", n)
	}
	if err := c.Flush(context.Background(), t0, waiting); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().PerLevel[1]; n != 1 {
		t.Fatalf("Flush within its bound left %d level-1 files, want 1", n)
	}
}

func TestFlushFoldsLevelZeroIntoOneFile(t *testing.T) {
	fs, _ := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	h.Exec("CREATE TABLE t (v TEXT)")
	c := New(fs, Config{}, nil)
	now := t0
	for i := 0; i < 20; i++ {
		h.Exec(fmt.Sprintf("INSERT INTO t (v) VALUES ('row %d')", i))
		c.Notify(h.Ship(now))
	}
	if err := c.CompactOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		h.Exec(fmt.Sprintf("INSERT INTO t (v) VALUES ('late %d')", i))
		c.Notify(h.Ship(now))
	}
	// Not due (same 30 s window): only Flush compacts the late files now.
	if err := c.Flush(context.Background(), now.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	plan, err := restore.Plan(context.Background(), fs, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) > 3 {
		t.Fatalf("after Flush the latest restore needs %d files, want <= 3: %v", len(plan), plan)
	}
	assertLatestRestored(t, fs, h, "after Flush")
}

// A burst of writes between two level-1 boundaries: level 1 is compacted as
// soon as more than L0Trigger level-0 files wait, not at the boundary.
func TestLevelZeroCountTriggersCompaction(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 100)
	const trigger = 20
	c := New(store, Config{Levels: []Level{{1, time.Hour}}, L0Trigger: trigger}, nil)
	now := t0.Truncate(time.Hour).Add(time.Second)
	c.Notify(h.Ship(now))
	if err := c.CompactOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	maxWaiting := 0
	for i := 1; i <= 100; i++ {
		now = now.Add(100 * time.Millisecond) // 10 s in all: no level-1 boundary
		writeOnce(h, rng, i)
		c.Notify(h.Ship(now))
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		maxWaiting = max(maxWaiting, len(c.inputsFor(1, now, time.Time{})))
	}
	if maxWaiting > trigger {
		t.Errorf("up to %d level-0 files waited for level 1; want at most the trigger, %d", maxWaiting, trigger)
	}
	if n := c.Stats().PerLevel[1]; n < 100/(trigger+1) {
		t.Errorf("level 1 holds %d files after 100 level-0 files with a trigger of %d", n, trigger)
	}
	h.RecordHash()
	out, res := restoreAt(t, fs, restore.Options{})
	if got := restoretest.FileHash(t, out); got != h.Hashes[res.Pos.TXID] || res.Pos.TXID != h.Pos().TXID {
		t.Fatalf("restore reached %s; the database differs from the source", res.Pos.TXID)
	}
}

// failOnce fails the first conditional create under a prefix.
type failOnce struct {
	replica.Store
	prefix string
	failed bool
}

func (s *failOnce) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	if !s.failed && strings.HasPrefix(k, s.prefix) {
		s.failed = true
		return replica.ObjectInfo{}, fmt.Errorf("injected failure of %s", k)
	}
	return s.Store.PutIfAbsent(ctx, k, r, n)
}

// A level whose write failed is retried on the next pass, not at its next
// clock boundary (an hour later for level 3).
func TestFailedLevelWriteIsRetriedBeforeTheNextBoundary(t *testing.T) {
	fs, _ := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 100)
	store := &failOnce{Store: fs, prefix: "ltx/1/"}
	c := New(store, Config{Levels: []Level{{1, time.Hour}}}, nil)
	now := t0.Truncate(time.Hour).Add(time.Second)
	c.Notify(h.Ship(now))
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 1; i <= 3; i++ {
		writeOnce(h, rng, i)
		c.Notify(h.Ship(now))
	}
	if err := c.CompactOnce(context.Background(), now); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("first pass: %v; want the injected failure", err)
	}
	if err := c.CompactOnce(context.Background(), now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().PerLevel[1]; n != 1 {
		t.Fatalf("level 1 holds %d files after the retry; want 1", n)
	}
}

// hungStore's object bodies never deliver a byte until the request is
// cancelled, as on a connection that stopped answering.
type hungStore struct{ replica.Store }

type hungBody struct{ ctx context.Context }

func (b hungBody) Read([]byte) (int, error) { <-b.ctx.Done(); return 0, b.ctx.Err() }
func (b hungBody) Close() error             { return nil }

func (s hungStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return hungBody{ctx}, nil
}

// A merge whose inputs stop delivering fails with a clear error once no
// progress was made for CallTimeout, instead of holding its budget forever.
func TestStalledInputFailsThePassAfterCallTimeout(t *testing.T) {
	fs, _ := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 10)
	h.Ship(t0)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 1; i <= 3; i++ {
		writeOnce(h, rng, i)
		h.Ship(t0)
	}
	budget := replica.NewBudget(8)
	c := New(hungStore{fs}, Config{CallTimeout: 100 * time.Millisecond, Budget: budget}, nil)
	errc := make(chan error, 1)
	go func() { errc <- c.CompactOnce(context.Background(), t0.Add(time.Minute)) }()
	select {
	case err := <-errc:
		if !errors.Is(err, replica.ErrStalled) {
			t.Fatalf("pass over stalled inputs: %v; want ErrStalled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a pass over stalled inputs did not give up")
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d budget slots still held after the failed pass", n)
	}
}

// Two hours of appends of incompressible rows: every level-1, 2 and 3 build
// crossed. The compaction levels must hold each range once (plus the pass
// that merges it): a level's files are merged upwards only when their
// point-in-time window is over, and deleted as soon as the level above holds
// them, so levels 1-3 never hold much more than the database, where keeping
// superseded copies for an interval held up to twice it.
func TestCompactionLevelsHoldEachRangeOnce(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	h.SkipHashes = true
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
	c := New(store, Config{}, nil)
	const seconds, step = 2*3600 + 300, 4
	worst, worstAt := 0.0, 0
	var worstLevels string
	for s := 0; s <= seconds; s += step {
		now := t0.Add(time.Duration(s) * time.Second)
		h.Exec("INSERT INTO t (v) VALUES (randomblob(4000))")
		c.Notify(h.Ship(now))
		if err := c.CompactOnce(context.Background(), now.Add(200*time.Millisecond)); err != nil {
			t.Fatalf("second %d: %v", s, err)
		}
		if s < 3600 {
			continue // the first hour's database is mostly level 0 and the first snapshot
		}
		st := c.levelBytes()
		copies := st[1] + st[2] + st[3]
		if r := float64(copies) / float64(fileSize(t, h.Path)); r > worst {
			worst, worstAt = r, s
			worstLevels = fmt.Sprintf("L1 %d KB, L2 %d KB, L3 %d KB", st[1]>>10, st[2]>>10, st[3]>>10)
		}
	}
	t.Logf("levels 1-3 at most %.2f× the database (second %d: %s)", worst, worstAt, worstLevels)
	if worst > 1.3 {
		t.Errorf("levels 1-3 held %.2f× the database at second %d (%s); want at most 1.3×", worst, worstAt, worstLevels)
	}
	h.RecordHash()
	out, res := restoreAt(t, fs, restore.Options{})
	if res.Pos.TXID != h.Pos().TXID || restoretest.FileHash(t, out) != h.Hashes[h.Pos().TXID] {
		t.Fatalf("latest restore reached TXID %d, not the exact state at %d", res.Pos.TXID, h.Pos().TXID)
	}
}

// levelBytes sums the index's file sizes per level.
func (c *Compactor) levelBytes() [replica.MaxLevel + 1]int64 {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	var out [replica.MaxLevel + 1]int64
	for l, files := range c.idx.levels {
		for _, f := range files {
			out[l] += f.Size
		}
	}
	return out
}
