package dbhost

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// lowerDescriptorLimit sets this process's soft RLIMIT_NOFILE to n for the
// test, as a small container or a default shell would.
func lowerDescriptorLimit(t *testing.T, n uint64) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = min(n, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

func openDescriptors(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v (the descriptor-limit tests need /proc/self/fd)", err)
	}
	return len(ents)
}

func (h *Host) openCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.dbs)
}

// forEach runs fn(i) for i in [0,n) on a few workers; the first error stops it.
func forEach(t *testing.T, n, workers int, fn func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		t.Fatal(*e)
	}
}

func readInt(ctx context.Context, db Database, sql string) (int64, error) {
	var n int64
	_, err := db.Read(ctx, func(c sqlconn.Conn) error {
		res, err := c.Exec(ctx, sqlconn.Stmt{SQL: sql, WantRows: true})
		if err == nil {
			n = res.Rows[0][0].Int
		}
		return err
	})
	return n, err
}

// Thousands of databases, each created and written once, under a 1,024
// descriptor limit: the host keeps at most MaxOpen open, every create
// succeeds, and every database reads back its row after being closed and
// reopened from its local file (no restore: the replica is gone by then).
func TestManyDatabasesUnderLowDescriptorLimit(t *testing.T) {
	n := 2000
	if testing.Short() || raceEnabled {
		n = 400
	}
	lowerDescriptorLimit(t, 1024)
	const maxOpen = 16
	store := newFileStore(t)
	dir := t.TempDir()
	h := newHost(t, store, dir, func(o *Options) { o.MaxOpen = maxOpen; o.ReadConns = 2 })
	ctx := context.Background()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peakOpen, peakFDs atomic.Int64
	note := func() {
		if o := int64(h.openCount()); o > peakOpen.Load() {
			peakOpen.Store(o)
		}
		if f := int64(openDescriptors(t)); f > peakFDs.Load() {
			peakFDs.Store(f)
		}
	}
	forEach(t, n, 8, func(i int) error {
		name := fmt.Sprintf("db%05d", i)
		db, err := h.Create(ctx, name)
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		_, err = db.Write(ctx, func(c sqlconn.Conn) error {
			if _, err := c.Exec(ctx, sqlconn.Stmt{SQL: "CREATE TABLE t(v INTEGER)"}); err != nil {
				return err
			}
			_, err := c.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t VALUES (?)", Args: []sqlconn.Value{{Type: sqlconn.Integer, Int: int64(i)}}})
			return err
		})
		note()
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	})
	// The cap is hard: an open waits for a busy database to become idle.
	if p := peakOpen.Load(); p > maxOpen {
		t.Fatalf("peak open databases = %d, cap %d", p, maxOpen)
	}
	t.Logf("%d databases: peak open %d (cap %d), peak descriptors %d (limit 1024)", n, peakOpen.Load(), maxOpen, peakFDs.Load())

	// Closed databases cost (almost) nothing: close the last open ones
	// (as the idle sweeper would) and compare the heap with the start.
	// (The last upload's bookkeeping may trail its answer for a moment.)
	for deadline := time.Now().Add(10 * time.Second); h.openCount() > 0 && time.Now().Before(deadline); {
		h.closeIdle(time.Now().UnixNano() + 1)
		time.Sleep(10 * time.Millisecond)
	}
	if o := h.openCount(); o != 0 {
		t.Fatalf("%d databases still open after closing every idle one", o)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perDB := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
	t.Logf("heap growth per known database: %d bytes", perDB)
	if perDB > 50<<10 {
		t.Fatalf("heap grows %d bytes per idle database, want <= 50 KiB", perDB)
	}

	// Reopening uses the local file and the engine's recorded position:
	// any restore now fails the test.
	var restores atomic.Int64
	h.opts.Replication.Restore = func(ctx context.Context, s replica.Store, p string) error {
		restores.Add(1)
		return fmt.Errorf("restore of %s must not be needed", p)
	}
	forEach(t, n, 8, func(i int) error {
		name := fmt.Sprintf("db%05d", i)
		db, err := h.Get(ctx, name)
		if err != nil {
			return fmt.Errorf("reopen %s: %w", name, err)
		}
		v, err := readInt(ctx, db, "SELECT v FROM t")
		if err != nil || v != int64(i) {
			return fmt.Errorf("%s: read %d, %v; want %d", name, v, err, i)
		}
		note()
		return nil
	})
	if r := restores.Load(); r != 0 {
		t.Fatalf("%d restores while reopening", r)
	}
	if p := peakOpen.Load(); p > maxOpen {
		t.Fatalf("peak open databases = %d, cap %d", p, maxOpen)
	}
	// And the bucket has each of them too.
	for _, i := range []int{0, n / 2, n - 1} {
		name := fmt.Sprintf("db%05d", i)
		if got := restoredCount(t, store, name, "SELECT v FROM t"); got != int64(i) {
			t.Fatalf("%s in the bucket: %d, want %d", name, got, i)
		}
	}
}

// Writers on more databases than the cap: databases are closed and reopened
// under them all the time, and every acknowledged write is in the bucket.
func TestEvictionWhileWritingLosesNothing(t *testing.T) {
	testEvictionWhileWriting(t, newFileStore(t), 24, 4, 3*time.Second)
}

func TestMinIOEvictionWhileWritingLosesNothing(t *testing.T) {
	testEvictionWhileWriting(t, newMinIOStore(t), 12, 3, 3*time.Second)
}

func testEvictionWhileWriting(t *testing.T, store replica.Store, dbs, maxOpen int, d time.Duration) {
	dir := t.TempDir()
	h := newHost(t, store, dir, func(o *Options) {
		o.MaxOpen = maxOpen
		o.ReadConns = 1
		o.IdleTimeout = 50 * time.Millisecond // the sweeper closes too, not only the cap
	})
	ctx := context.Background()
	for i := 0; i < dbs; i++ {
		db, err := h.Create(ctx, fmt.Sprintf("w%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		write(t, db, "CREATE TABLE t(id INTEGER PRIMARY KEY)")
	}
	acked := make([][]int64, dbs)
	var mu sync.Mutex
	var nextID, failures, reads atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < 2*dbs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for time.Now().Before(stop) {
				i := r.IntN(dbs)
				db, err := h.Get(ctx, fmt.Sprintf("w%02d", i))
				if err != nil {
					failures.Add(1)
					t.Errorf("get: %v", err)
					return
				}
				if r.IntN(4) == 0 {
					if _, err := readInt(ctx, db, "SELECT count(*) FROM t"); err != nil {
						t.Errorf("read w%02d: %v", i, err)
						return
					}
					reads.Add(1)
					continue
				}
				id := nextID.Add(1)
				_, err = db.Write(ctx, func(c sqlconn.Conn) error {
					_, err := c.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t VALUES (?)", Args: []sqlconn.Value{{Type: sqlconn.Integer, Int: id}}})
					return err
				})
				if err != nil {
					t.Errorf("write w%02d: %v", i, err)
					return
				}
				mu.Lock()
				acked[i] = append(acked[i], id)
				mu.Unlock()
				if r.IntN(8) == 0 {
					time.Sleep(60 * time.Millisecond) // let the sweeper find idle ones
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ev := h.evictions.Load()
	total := 0
	for _, a := range acked {
		total += len(a)
	}
	t.Logf("%d acknowledged writes, %d reads on %d databases (cap %d), %d closes while running", total, reads.Load(), dbs, maxOpen, ev)
	if ev < int64(dbs) {
		t.Fatalf("only %d databases were closed while writing; the test did not exercise eviction", ev)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, ids := range acked {
		name := fmt.Sprintf("w%02d", i)
		for _, id := range ids {
			if got := restoredCount(t, store, name, fmt.Sprintf("SELECT count(*) FROM t WHERE id=%d", id)); got != 1 {
				t.Fatalf("%s: acknowledged row %d missing from the bucket", name, id)
			}
			break // one restore per database; the count below checks the rest
		}
		if got := restoredCount(t, store, name, "SELECT count(*) FROM t"); got != int64(len(ids)) {
			t.Fatalf("%s: bucket has %d rows, %d were acknowledged", name, got, len(ids))
		}
	}
}

// A database that exists only in the bucket is listed (local: false), and
// its first use restores it.
func TestListShowsReplicaOnlyDatabases(t *testing.T) {
	store := newFileStore(t)
	ctx := context.Background()
	h1 := newHost(t, store, t.TempDir(), nil)
	db, err := h1.Create(ctx, "remote1")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(x)")
	if err := h1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h2 := newHost(t, store, t.TempDir(), nil)
	if _, err := h2.Create(ctx, "local1"); err != nil {
		t.Fatal(err)
	}
	infos, err := h2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, in := range infos {
		got[in.Name] = in.Local
	}
	if l, ok := got["remote1"]; !ok || l {
		t.Fatalf("remote1 listed=%v local=%v, want listed and not local: %+v", ok, l, infos)
	}
	if l, ok := got["local1"]; !ok || !l {
		t.Fatalf("local1 listed=%v local=%v, want local: %+v", ok, l, infos)
	}
	if _, err := h2.Get(ctx, "remote1"); err != nil {
		t.Fatal(err)
	}
	if in, ok := h2.Describe("remote1"); !ok || !in.Local || !in.Open {
		t.Fatalf("after first use: %+v %v", in, ok)
	}
}

func TestDefaultMaxOpenFollowsDescriptorLimit(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, 256}, {1 << 20, 256}, {1024, (1024 - 256) / 22}, {4096, (4096 - 256) / 22}, {100, 1}} {
		if got := defaultMaxOpen(4, c.nofile); got != c.want {
			t.Errorf("defaultMaxOpen(4, %d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}
