package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

// Two instances on one bucket; A writes database "cold", B has never seen
// it. B's requests for its lease object are held back by a proxy in front of
// the bucket, so B's lease cannot settle: a read on B (JSON API, a Hrana
// pipeline, Hrana over WebSocket) is still answered at once, from B's cold view of what the
// bucket holds, as a follower would answer it. A write on B, and a read
// whose bookmark is newer than that view, wait; once B's lease requests go
// through and find A holding the lease, the write is forwarded to A and
// acknowledged, the read sees A's newer rows, and every later write on B is
// forwarded too. Every acknowledged row, and nothing else, is in a restore.
func TestColdReadDoesNotWaitForTheLease(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	gate := newLeaseGate(t, m.Endpoint(), "/cold/sluice/lease")
	hostA := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	hostB := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	baseA, baseB := "http://"+hostA, "http://"+hostB
	serve := func(host, replicaURL string) *process {
		p := start(t, m.Env(), sluiceBin, "serve", "-durability", "sync", "-data", t.TempDir(),
			"-replica", replicaURL, "-listen", host, "-token", "rwtoken1:rw")
		waitUntil(t, 60*time.Second, func() bool { return readyCode("http://"+host+"/ready") == 200 }, p)
		return p
	}
	// B starts first: only a newer instance asks the holder to hand over,
	// so B's writes go to A for the whole test.
	b := serve(hostB, strings.Replace(m.URL(bucket, ""), url.QueryEscape(m.Endpoint()), url.QueryEscape(gate.URL), 1))
	time.Sleep(50 * time.Millisecond)
	a := serve(hostA, m.URL(bucket, ""))
	defer func() {
		if t.Failed() {
			t.Logf("A:\n%s\nB:\n%s", lastLines(a.out.String(), 30), lastLines(b.out.String(), 30))
		}
	}()

	acked := map[int]bool{}
	write := func(base string, id int) (int, string, uint64) {
		st, body, bm := coldCall(t, base+"/v1/databases/cold/query", "", fmt.Sprintf(`{"sql": "INSERT INTO t (id, v) VALUES (%d, 'row %d')"}`, id, id))
		if st == 200 {
			acked[id] = true
		}
		return st, body, bm
	}
	if st, body, _ := coldCall(t, baseA+"/v1/databases/cold", "PUT", ""); st/100 != 2 {
		t.Fatalf("create on A: %d %s", st, body)
	}
	if st, body, _ := coldCall(t, baseA+"/v1/databases/cold/query", "", `{"sql": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"}`); st != 200 {
		t.Fatalf("create table on A: %d %s", st, body)
	}
	for id := 1; id <= 50; id++ {
		if st, body, _ := write(baseA, id); st != 200 {
			t.Fatalf("write %d on A: %d %s", id, st, body)
		}
	}

	// B's lease requests are held: its reads are answered anyway.
	count := `{"sql": "SELECT count(*), sum(id) FROM t"}`
	st, body := quickly(t, func() (int, string) {
		st, body, _ := coldCall(t, baseB+"/v1/databases/cold/query", "", count)
		return st, body
	})
	if st != 200 || !strings.Contains(body, "[[50,1275]]") {
		t.Fatalf("JSON API read on B: %d %s, want 50 rows summing to 1275", st, body)
	}
	if n := gate.answered.Load(); n != 0 {
		t.Fatalf("the read on B was answered only after %d of its lease requests went through: it waited for the lease", n)
	}
	pipeline := `{"requests": [{"type": "execute", "stmt": {"sql": "SELECT count(*) FROM t"}}, {"type": "close"}]}`
	st, body = quickly(t, func() (int, string) {
		st, body, _ := coldCall(t, baseB+"/db/cold/v2/pipeline", "", pipeline)
		return st, body
	})
	if st != 200 || !strings.Contains(body, `"value":"50"`) {
		t.Fatalf("Hrana pipeline read on B: %d %s, want a count of 50", st, body)
	}
	if n := gate.answered.Load(); n != 0 {
		t.Fatalf("the Hrana read on B was answered only after %d of its lease requests went through", n)
	}
	// Hrana over WebSocket (libsql-client-go): the same view.
	ws, err := sql.Open("libsql", "ws://"+hostB+"/db/cold/?authToken=rwtoken1")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, body = quickly(t, func() (int, string) {
		var n int
		if err := ws.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
			return 0, err.Error()
		}
		return 200, fmt.Sprint(n)
	})
	if st != 200 || body != "50" {
		t.Fatalf("WebSocket read on B: %d %s, want a count of 50", st, body)
	}
	if n := gate.answered.Load(); n != 0 {
		t.Fatalf("the WebSocket read on B was answered only after %d of its lease requests went through", n)
	}
	t.Logf("reads on B answered with its lease requests held (%d held so far)", gate.held.Load())

	// A writes on; B's view does not have these rows yet.
	var newest uint64
	for id := 51; id <= 55; id++ {
		var st int
		var body string
		if st, body, newest = write(baseA, id); st != 200 {
			t.Fatalf("write %d on A: %d %s", id, st, body)
		}
	}
	type answer struct {
		st   int
		body string
	}
	wrote, read := make(chan answer, 1), make(chan answer, 1)
	go func() {
		st, body, _ := coldCall(t, baseB+"/v1/databases/cold/query", "", `{"sql": "INSERT INTO t (id, v) VALUES (56, 'row 56')"}`)
		wrote <- answer{st, body}
	}()
	go func() {
		st, body, _ := coldDo(t, http.MethodPost, baseB+"/v1/databases/cold/query", count, fmt.Sprint(newest))
		read <- answer{st, body}
	}()
	select {
	case w := <-wrote:
		t.Fatalf("a write on B was answered before B's lease settled: %d %s", w.st, w.body)
	case r := <-read:
		t.Fatalf("a read on B with bookmark %d, newer than its view, was answered before B's lease settled: %d %s", newest, r.st, r.body)
	case <-time.After(time.Second):
	}
	gate.open()
	if w := <-wrote; w.st != 200 {
		t.Fatalf("write on B once the lease settled elsewhere: %d %s, want it forwarded to A and acknowledged", w.st, w.body)
	}
	acked[56] = true
	if r := <-read; r.st != 200 || !strings.Contains(r.body, "[[5") {
		t.Fatalf("read on B with bookmark %d: %d %s, want A's newer rows (55 or 56)", newest, r.st, r.body)
	} else if !strings.Contains(r.body, "[[55,1540]]") && !strings.Contains(r.body, "[[56,1596]]") {
		t.Fatalf("read on B with bookmark %d: %s, want 55 rows (or 56 with the forwarded write)", newest, r.body)
	}
	for id := 57; id <= 80; id++ {
		if st, body, _ := write(baseB, id); st != 200 {
			t.Fatalf("write %d on B: %d %s, want it forwarded to A and acknowledged", id, st, body)
		}
	}
	if out := b.out.String(); strings.Contains(out, "cold open: restored") || !strings.Contains(out, "cold open: the lease could not be taken") {
		t.Fatalf("B was to find A holding the lease and end its cold open; its log:\n%s", lastLines(out, 30))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := replicaurl.Open(ctx, m.URL(bucket, "cold"))
	if err != nil {
		t.Fatal(err)
	}
	if rec, _, err := lease.Read(ctx, store); err != nil || rec.URL != baseA {
		t.Fatalf("lease after B's writes: %+v, %v; want A (%s) holding it: B's writes were forwarded", rec, err, baseA)
	}

	// Acknowledged against restored.
	restored := filepath.Join(t.TempDir(), "cold.db")
	mustSluice(t, m.Env(), "restore", "-q", "-o", restored, m.URL(bucket, "cold"))
	ids := rowIDs(t, restored)
	for id := range ids {
		if !acked[id] {
			t.Fatalf("restored row %d was never acknowledged", id)
		}
	}
	got := len(ids)
	if got != len(acked) {
		t.Fatalf("restored %d rows, %d acknowledged", got, len(acked))
	}
	t.Logf("acknowledged %d, restored %d of %d (lease requests held back %d, let through %d)",
		len(acked), got, len(acked), gate.held.Load(), gate.answered.Load())
}

// quickly runs call, a read on B while its lease requests are held, and
// fails the test if it is not answered within 10 s (the held requests go
// through after 30 s): it waits for the lease.
func quickly(t *testing.T, call func() (int, string)) (int, string) {
	t.Helper()
	type answer struct {
		st   int
		body string
	}
	ch := make(chan answer, 1)
	go func() {
		st, body := call()
		ch <- answer{st, body}
	}()
	select {
	case a := <-ch:
		return a.st, a.body
	case <-time.After(10 * time.Second):
		t.Fatal("a read on B was not answered within 10 s while its lease requests were held: it waits for the lease")
		return 0, ""
	}
}

// coldCall sends one request with the test's token (POST unless method is
// set) and returns its status, body (compacted) and bookmark.
func coldCall(t *testing.T, url, method, body string) (int, string, uint64) {
	t.Helper()
	if method == "" {
		method = http.MethodPost
	}
	return coldDo(t, method, url, body, "")
}

// coldDo is coldCall with a Sluice-Bookmark (none if empty).
func coldDo(t *testing.T, method, url, body, bookmark string) (int, string, uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Error(err)
		return 0, "", 0
	}
	req.Header.Set("Authorization", "Bearer rwtoken1")
	if bookmark != "" {
		req.Header.Set("Sluice-Bookmark", bookmark)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var bm uint64
	fmt.Sscan(resp.Header.Get("Sluice-Bookmark"), &bm)
	var compact bytes.Buffer
	if json.Compact(&compact, b) == nil {
		b = compact.Bytes()
	}
	return resp.StatusCode, string(b), bm
}

// leaseGate is a reverse proxy to MinIO that holds every request for a
// path containing hold until open is called (or 30 s passed, so that the
// test ends by itself), counting those it held and those it let through.
type leaseGate struct {
	URL             string
	gate            chan struct{}
	held, answered  atomic.Int64
	opened, expired atomic.Bool
}

func newLeaseGate(t *testing.T, target, hold string) *leaseGate {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	g := &leaseGate{gate: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, hold) {
			g.held.Add(1)
			select {
			case <-g.gate:
			case <-time.After(30 * time.Second):
				g.expired.Store(true)
			case <-r.Context().Done():
				return
			}
			g.answered.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.open)
	g.URL = srv.URL
	return g
}

func (g *leaseGate) open() {
	if g.opened.CompareAndSwap(false, true) {
		close(g.gate)
	}
}
