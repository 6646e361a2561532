package server

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
	"zombiezen.com/go/sqlite"
)

// slowPUTs is a reverse proxy in front of MinIO that holds every PUT of a
// level-0 LTX file for a random 30..150 ms (a real bucket's latency, with
// its spread: a later upload often lands first) and counts the uploads in
// flight. A PUT whose client went away while it was held is dropped, as a
// request cut by a dying process is.
type slowPUTs struct {
	srv               *httptest.Server
	inFlight, maxSeen atomic.Int64
}

func newSlowPUTs(t *testing.T, target string) *slowPUTs {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &slowPUTs{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && isLevel0(r.URL.Path) {
			n := p.inFlight.Add(1)
			defer p.inFlight.Add(-1)
			for m := p.maxSeen.Load(); n > m && !p.maxSeen.CompareAndSwap(m, n); m = p.maxSeen.Load() {
			}
			select {
			case <-time.After(time.Duration(30+rand.IntN(120)) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// replicaURL is m's replica URL for bucket/prefix through the proxy.
func (p *slowPUTs) replicaURL(m *testenv.MinIOServer, bucket, prefix string) string {
	return strings.Replace(m.URL(bucket, prefix), url.QueryEscape(m.Endpoint()), url.QueryEscape(p.srv.URL), 1)
}

// waitInFlight waits until at least n uploads are held at once.
func (p *slowPUTs) waitInFlight(t *testing.T, n int64, log *testenv.Output) int64 {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := p.inFlight.Load(); got >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %d uploads in flight at once (most seen: %d)\n%s", n, p.maxSeen.Load(), log.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// acked is the set of row ids whose INSERT was answered 2xx.
type acked struct {
	mu  sync.Mutex
	ids map[int64]bool
}

// insertLoop inserts rows with ids from next into t on bases (round robin)
// from workers goroutines until stop, recording every id answered 2xx.
// Each worker pauses a random 0..20 ms after an answer, as independent
// clients do: writers answered together would otherwise come back as one
// wave, which the server gathers into one upload, and keep few in flight.
func insertLoop(bases func() []string, workers int, next *atomic.Int64, a *acked, stop <-chan struct{}) *sync.WaitGroup {
	client := &http.Client{Timeout: 20 * time.Second}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				bs := bases()
				id := next.Add(1)
				status, _, _, err := postWrite(client, bs[(w+i)%len(bs)], int(id), w)
				if err == nil && status/100 == 2 {
					a.mu.Lock()
					a.ids[id] = true
					a.mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	return &wg
}

// checkRestored restores the newest state of the database "default" from
// the bucket directly (not through the proxy) and checks that it holds
// every acknowledged id, that the replica's history has no gap, and
// returns the rows restored and the TXID reached.
func checkRestored(t *testing.T, m *testenv.MinIOServer, bucket, prefix string, a *acked) (restored int, txid uint64) {
	t.Helper()
	ctx := context.Background()
	store, err := replicaurl.Open(ctx, m.URL(bucket, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sub := replica.Sub(store, "default")
	out := filepath.Join(t.TempDir(), "restored.db")
	res, err := restore.Restore(ctx, sub, out, restore.Options{IntegrityCheck: true})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	c, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	have := map[int64]bool{}
	st, _, err := c.PrepareTransient("SELECT id FROM t")
	if err != nil {
		t.Fatal(err)
	}
	for {
		row, err := st.Step()
		if err != nil {
			t.Fatal(err)
		}
		if !row {
			break
		}
		have[st.ColumnInt64(0)] = true
	}
	st.Finalize()
	a.mu.Lock()
	defer a.mu.Unlock()
	missing := 0
	for id := range a.ids {
		if !have[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged rows are missing from the restored database (%d rows)", missing, len(a.ids), len(have))
	}
	return len(have), uint64(res.Pos.TXID)
}

// gapInBucket reports the first gap in the replica's history (ok=false:
// none), the level-0 file count and the newest TXID any file holds.
func gapInBucket(t *testing.T, m *testenv.MinIOServer, bucket, prefix string) (from, to uint64, l0 int, newest uint64, ok bool) {
	t.Helper()
	ctx := context.Background()
	store, err := replicaurl.Open(ctx, m.URL(bucket, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	levels, err := replica.ListAllLTX(ctx, replica.Sub(store, "default"))
	if err != nil {
		t.Fatal(err)
	}
	var files []replica.LTXFile
	for _, l := range levels {
		files = append(files, l...)
	}
	for _, f := range files {
		newest = max(newest, uint64(f.MaxTXID))
	}
	f, tt, ok := restore.Gap(files)
	return uint64(f), uint64(tt), len(levels[0]), newest, ok
}

func createT(t *testing.T, base string) {
	t.Helper()
	if code, body, err := post(base, "default", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER)"}`); err != nil || code != 200 {
		t.Fatalf("create table: %d %s %v", code, body, err)
	}
}

// kill -9 of a writer with several uploads in flight (held by a slow
// store, landing out of order): a restore holds every acknowledged row and
// stops at the end of the one contiguous history, never at a gap it takes
// for the end; the next lease holder removes the uploads that landed past
// a TXID that never did, continues the history, and a restore after it has
// every acknowledged row of both and no gap.
func TestServePipelineKill9WithUploadsInFlight(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	proxy := newSlowPUTs(t, m.Endpoint())
	url := proxy.replicaURL(m, bucket, "srv")
	bin := buildSluice(t)
	a := startServe(t, bin, m.Env(), "-data", t.TempDir(), "-replica", url, "-lease-ttl", "2s", "-upload-pipeline", "8")
	createT(t, a.base)

	ack := &acked{ids: map[int64]bool{}}
	var next atomic.Int64
	stop := make(chan struct{})
	wg := insertLoop(func() []string { return []string{a.base} }, 24, &next, ack, stop)
	time.Sleep(1500 * time.Millisecond)
	held := proxy.waitInFlight(t, 4, a.log)
	a.cmd.Process.Kill()
	<-a.done
	close(stop)
	wg.Wait()
	for proxy.inFlight.Load() > 0 { // let the held PUTs land or be dropped
		time.Sleep(10 * time.Millisecond)
	}
	ack.mu.Lock()
	nA := len(ack.ids)
	ack.mu.Unlock()
	from, to, l0, newest, gap := gapInBucket(t, m, bucket, "srv")
	t.Logf("killed with %d uploads in flight (at most %d at once); %d rows acknowledged; level 0 holds %d files; gap past the end: %v (TXIDs %d..%d)",
		held, proxy.maxSeen.Load(), nA, l0, gap, from, to)
	if nA < 50 {
		t.Fatalf("only %d writes acknowledged before the kill: the test proves nothing", nA)
	}
	restored, txid := checkRestored(t, m, bucket, "srv", ack)
	t.Logf("after kill -9: %d acknowledged, %d restored at TXID %d (unacknowledged writes that landed count too)", nA, restored, txid)
	if gap && txid != from-1 {
		t.Fatalf("restored TXID %d, want %d: the end of the contiguous history before the gap at %d", txid, from-1, from)
	}
	if !gap && txid != newest {
		t.Fatalf("restored TXID %d, but the bucket's history reaches %d without a gap", txid, newest)
	}

	// The next holder takes the lease once it expires, cleans up, and writes.
	b := startServe(t, bin, m.Env(), "-data", t.TempDir(), "-replica", url, "-lease-ttl", "2s", "-upload-pipeline", "8")
	stop = make(chan struct{})
	wg = insertLoop(func() []string { return []string{b.base} }, 8, &next, ack, stop)
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("b did not exit after SIGTERM")
	}
	ack.mu.Lock()
	nAll := len(ack.ids)
	ack.mu.Unlock()
	if nAll <= nA {
		t.Fatalf("the next holder acknowledged nothing\n%s", b.log.String())
	}
	if from, to, _, _, gap := gapInBucket(t, m, bucket, "srv"); gap {
		t.Fatalf("after the next holder's run the replica has a gap at TXIDs %d..%d\n%s", from, to, b.log.String())
	}
	restored, txid = checkRestored(t, m, bucket, "srv", ack)
	t.Logf("after the next holder: %d acknowledged, %d restored at TXID %d, no gap", nAll, restored, txid)
}

// Another instance takes the lease while the writer has uploads in flight
// (the writer frozen by SIGSTOP past its lease, as a VM pause or a long GC
// would): the writer resumes to find it lost and acknowledges nothing
// itself afterwards; every acknowledged row is restored and the history
// has no gap.
func TestServePipelineTakeoverMidPipeline(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	proxy := newSlowPUTs(t, m.Endpoint())
	url := proxy.replicaURL(m, bucket, "srv")
	bin := buildSluice(t)
	a := startServe(t, bin, m.Env(), "-data", t.TempDir(), "-replica", url, "-lease-ttl", "2s", "-upload-pipeline", "8")
	createT(t, a.base)

	ack := &acked{ids: map[int64]bool{}}
	var next atomic.Int64
	var targets atomic.Value
	targets.Store([]string{a.base})
	stop := make(chan struct{})
	wg := insertLoop(func() []string { return targets.Load().([]string) }, 24, &next, ack, stop)
	time.Sleep(1500 * time.Millisecond)
	held := proxy.waitInFlight(t, 4, a.log)
	a.cmd.Process.Signal(syscall.SIGSTOP)
	paused := time.Now()
	ack.mu.Lock()
	nPaused := len(ack.ids)
	ack.mu.Unlock()

	b := startServe(t, bin, m.Env(), "-data", t.TempDir(), "-replica", url, "-lease-ttl", "2s", "-upload-pipeline", "8")
	targets.Store([]string{b.base})
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := post(b.base, "default", `{"sql":"SELECT count(*) FROM t"}`)
		if err == nil && code == 200 && strings.Contains(b.log.String(), "lease acquired") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not take the lease within 30 s: %d %s %v\n%s", code, body, err, b.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("b took the lease %s after a was frozen with %d uploads in flight", time.Since(paused).Round(10*time.Millisecond), held)
	time.Sleep(time.Second)

	// a resumes: its own writes after the lease was lost must not be
	// acknowledged by it. Requests sent to a now are answered by a's write
	// path (refused) or forwarded to b, never both.
	a.cmd.Process.Signal(syscall.SIGCONT)
	targets.Store([]string{a.base, b.base})
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	ack.mu.Lock()
	nAll := len(ack.ids)
	ack.mu.Unlock()
	if nAll <= nPaused {
		t.Fatalf("nothing acknowledged after the takeover\n--- b:\n%s", b.log.String())
	}
	alog := a.log.String()
	if !strings.Contains(alog, "LEASE LOST") && !strings.Contains(alog, "no longer the database's writer") && !strings.Contains(alog, "not acknowledged") {
		t.Fatalf("a never said it lost the write role\n%s", alog)
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("b did not exit after SIGTERM")
	}
	a.cmd.Process.Kill()
	<-a.done
	if from, to, _, _, gap := gapInBucket(t, m, bucket, "srv"); gap {
		t.Fatalf("the replica has a gap at TXIDs %d..%d\n--- a:\n%s\n--- b:\n%s", from, to, alog, b.log.String())
	}
	restored, txid := checkRestored(t, m, bucket, "srv", ack)
	t.Logf("%d acknowledged before the freeze, %d in all; %d restored at TXID %d, no gap", nPaused, nAll, restored, txid)
}

// isLevel0 reports whether an S3 request path names a level-0 LTX file
// (the S3 layout stores level L under a four-digit directory).
func isLevel0(path string) bool {
	return strings.Contains(path, "/0000/") && strings.HasSuffix(path, ".ltx")
}
