package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

// Followers pushed to by the writer: a -follow instance hears each shipped
// TXID from the lease holder and fetches it from the bucket at once; a cut
// push falls back to polling; a push the bucket does not back changes
// nothing.

// serveInstance starts `sluice serve` on a free port with the test token.
func serveInstance(t *testing.T, m *testenv.MinIOServer, name, url string, args ...string) *instance {
	t.Helper()
	data, port := t.TempDir(), testenv.FreePort()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	all := append([]string{"serve", "-data", data, "-replica", url, "-addr", "127.0.0.1:" + strconv.Itoa(port), "-token", overlapToken}, args...)
	in := startProc(t, name, m.Env(), all...)
	in.base, in.data = base, data
	waitHTTP(t, in, base+"/health")
	return in
}

// readCount reads count(*) of t on in, waiting for bookmark (0: none), and
// returns the count and the answer's bookmark.
func readCount(ctx context.Context, in *instance, bookmark uint64) (int64, uint64, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", in.base+"/v1/databases/default/query",
		strings.NewReader(`{"sql":"SELECT count(*) FROM t"}`))
	req.Header.Set("Authorization", "Bearer "+overlapToken)
	req.Header.Set("Content-Type", "application/json")
	if bookmark > 0 {
		req.Header.Set("Sluice-Bookmark", strconv.FormatUint(bookmark, 10))
	}
	resp, err := overlapClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	bm, _ := strconv.ParseUint(resp.Header.Get("Sluice-Bookmark"), 10, 64)
	i := bytes.Index(b, []byte(`"rows":[[`))
	if i < 0 {
		return 0, 0, fmt.Errorf("no rows in %s", b)
	}
	n, err := strconv.ParseInt(string(b[i+9:i+9+bytes.IndexByte(b[i+9:], ']')]), 10, 64)
	return n, bm, err
}

func insertRow(ctx context.Context, in *instance, id int) (pauseAnswer, error) {
	return pauseQuery(ctx, in, fmt.Sprintf(`{"sql":"INSERT INTO t(id) VALUES (%d)"}`, id))
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// restoredRows restores url's database and returns its ids of t.
func restoredRows(t *testing.T, url string) map[int64]bool {
	t.Helper()
	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "default"), out, restore.Options{}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	db, err := sql.Open("sqlite", out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A follower polling every 5 s sees each commit within milliseconds of
// its acknowledgement: the writer pushed it.
func TestFollowerIsPushedEachCommit(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	writer := serveInstance(t, m, "writer", url, "-lease-ttl", "2s")
	if _, err := pauseQuery(context.Background(), writer, `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY)"}`); err != nil {
		t.Fatal(err)
	}
	follower := serveInstance(t, m, "follower", url, "-follow", "-follow-poll", "5s")
	ctx := context.Background()
	if _, _, err := readCount(ctx, follower, 0); err != nil { // starts the copy and its subscription
		t.Fatal(err)
	}
	var lags []time.Duration
	acked := 0
	for i := 1; i <= 150; i++ {
		a, err := insertRow(ctx, writer, i)
		if err != nil {
			t.Fatal(err)
		}
		acked++
		at := time.Now()
		n, _, err := readCount(ctx, follower, a.bookmark)
		if err != nil {
			t.Fatalf("read at the write's bookmark on the follower: %v\n%s", err, follower.log.String())
		}
		if n != int64(acked) {
			t.Fatalf("the follower at bookmark %d counts %d rows, %d were acknowledged", a.bookmark, n, acked)
		}
		if i > 20 { // the first writes may come before the subscription is up
			lags = append(lags, time.Since(at))
		}
		time.Sleep(5 * time.Millisecond)
	}
	p50, p99 := percentile(lags, 50), percentile(lags, 99)
	t.Logf("follower lag (write answered -> visible on the follower, poll 5s), %d probes: p50 %s p99 %s", len(lags),
		p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
	// The promise is p99 <= 50 ms on loopback (measured by sluice bench
	// handoff); without the push a 5 s poll makes it seconds. The margin is
	// for a loaded machine.
	if p99 > 250*time.Millisecond {
		t.Fatalf("follower lag p99 %s, want <= 50 ms (250 ms with a margin for a loaded machine)\n%s", p99, follower.log.String())
	}
	writer.terminate(t)
	if got := len(restoredRows(t, url)); got != acked {
		t.Fatalf("restored %d rows, %d acknowledged", got, acked)
	}
	t.Logf("acknowledged %d, restored %d", acked, acked)
}

// cutProxy is a TCP proxy to target whose connections can all be cut, and
// which then refuses every new one; it notes whether a push subscription
// went through it.
type cutProxy struct {
	ln       net.Listener
	target   string
	mu       sync.Mutex
	conns    []net.Conn
	cut      bool
	pushSubs atomic.Int32
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cutAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if bytes.Contains(buf[:n], []byte("/shipped HTTP/1.1")) {
							p.pushSubs.Add(1)
						}
						if _, werr := up.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				up.Close()
			}()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A follower whose push connection is cut (and cannot reconnect) still
// catches up with every acknowledged write by polling the bucket.
func TestFollowerCutFromItsPushCatchesUpByPolling(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	port := testenv.FreePort()
	proxy := newCutProxy(t, "127.0.0.1:"+strconv.Itoa(port))
	data := t.TempDir()
	writer := startProc(t, "writer", m.Env(), "serve", "-data", data, "-replica", url, "-addr", "127.0.0.1:"+strconv.Itoa(port),
		"-token", overlapToken, "-lease-ttl", "2s", "-advertise", proxy.url())
	writer.base, writer.data = "http://127.0.0.1:"+strconv.Itoa(port), data
	waitHTTP(t, writer, writer.base+"/health")
	ctx := context.Background()
	if _, err := pauseQuery(ctx, writer, `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY)"}`); err != nil {
		t.Fatal(err)
	}
	follower := serveInstance(t, m, "follower", url, "-follow", "-follow-poll", "200ms")
	if _, _, err := readCount(ctx, follower, 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); proxy.pushSubs.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower never subscribed to the writer's pushes through %s\n%s", proxy.url(), follower.log.String())
		}
	}
	acked := 0
	var last uint64
	write := func(n int) {
		for i := 0; i < n; i++ {
			acked++
			a, err := insertRow(ctx, writer, acked)
			if err != nil {
				t.Fatal(err)
			}
			last = a.bookmark
		}
	}
	write(20)
	proxy.cutAll()
	write(50)
	start := time.Now()
	n, bm, err := readCount(ctx, follower, last)
	if err != nil {
		t.Fatalf("the cut follower did not reach the last write's bookmark: %v\n%s", err, follower.log.String())
	}
	if n != int64(acked) || bm < last {
		t.Fatalf("the cut follower counts %d rows at bookmark %d; %d acknowledged, last bookmark %d", n, bm, acked, last)
	}
	t.Logf("push subscriptions before the cut: %d; after the cut the follower reached the last of %d acknowledged writes in %s by polling",
		proxy.pushSubs.Load(), acked, time.Since(start).Round(time.Millisecond))
}

// A "holder" that pushes TXIDs the bucket does not hold (a stale or lying
// writer) makes the follower fetch, find nothing, and apply nothing: it
// stays at what the bucket holds.
func TestPushedTXIDTheBucketLacksIsNeverApplied(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	writer := serveInstance(t, m, "writer", url, "-lease-ttl", "2s")
	ctx := context.Background()
	if _, err := pauseQuery(ctx, writer, `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY)"}`); err != nil {
		t.Fatal(err)
	}
	var bucketTXID uint64
	for i := 1; i <= 3; i++ {
		a, err := insertRow(ctx, writer, i)
		if err != nil {
			t.Fatal(err)
		}
		bucketTXID = a.bookmark
	}
	writer.terminate(t) // releases the lease

	// The fake holder takes the lease (as a real one would) and pushes
	// TXIDs that are not in the bucket, fast.
	var subs atomic.Int32
	stopFake := make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/shipped") {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		subs.Add(1)
		w.WriteHeader(200)
		for i := uint64(1); r.Context().Err() == nil; i++ {
			select {
			case <-stopFake:
				return
			default:
			}
			if _, err := fmt.Fprintf(w, "shipped %d\nshipped %d\n", bucketTXID+1, bucketTXID+i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Millisecond)
		}
	}))
	defer fake.Close()
	defer close(stopFake) // before Close, which waits for the stream to end
	store, err := replicaurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l, err := lease.TryAcquire(ctx, replica.Sub(store, "default"), lease.Options{Holder: lease.NewHolderID(), URL: fake.URL, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	follower := serveInstance(t, m, "follower", url, "-follow", "-follow-poll", "100ms")
	n, bm, err := readCount(ctx, follower, 0)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); subs.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower never subscribed to the fake holder\n%s", follower.log.String())
		}
	}
	time.Sleep(time.Second) // hundreds of lying pushes
	n2, bm2, err := readCount(ctx, follower, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || n2 != 3 || bm != bucketTXID || bm2 != bucketTXID {
		t.Fatalf("follower read %d rows at TXID %d, then %d at %d; the bucket holds 3 rows at TXID %d", n, bm, n2, bm2, bucketTXID)
	}
	t.Logf("%d subscriptions to the lying holder; the follower stayed at the bucket's TXID %d with its 3 rows", subs.Load(), bucketTXID)
}
