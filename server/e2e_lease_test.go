package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
	"zombiezen.com/go/sqlite"
)

const incrementSQL = `{"sql":"UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count"}`

// firstInt parses results[0].rows[0][0] of a JSON API answer.
func firstInt(t *testing.T, body string) (int64, bool) {
	var out struct {
		Results []struct {
			Rows [][]json.Number `json:"rows"`
		} `json:"results"`
	}
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&out); err != nil || len(out.Results) == 0 || len(out.Results[0].Rows) == 0 {
		return 0, false
	}
	n, err := out.Results[0].Rows[0][0].Int64()
	return n, err == nil
}

func restoredInt(t *testing.T, url, query string) int64 {
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
	c, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.PrepareTransient(query)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Finalize()
	if row, err := st.Step(); err != nil || !row {
		t.Fatalf("%s on the restored database: %v", query, err)
	}
	return st.ColumnInt64(0)
}

// counterRun sends increments to both instances from 8 workers until stop,
// recording every count answered 2xx.
func counterRun(bases []string, stop <-chan struct{}) (counts []int64, failures int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := post(bases[(w+i)%len(bases)], "default", incrementSQL)
				mu.Lock()
				if err == nil && code/100 == 2 {
					if n, ok := firstInt(nil, body); ok {
						counts = append(counts, n)
					}
				} else {
					failures++
				}
				mu.Unlock()
				if err != nil || code/100 != 2 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	return counts, failures
}

func startPair(t *testing.T) (url string, a, b *serveProc, minio *testenv.MinIOServer) {
	minio = testenv.MinIO(t)
	url = minio.URL(minio.NewBucket(t), "srv")
	bin := buildSluice(t)
	a = startServe(t, bin, minio.Env(), "-data", t.TempDir(), "-replica", url, "-lease", "-lease-ttl", "2s")
	if code, body, err := post(a.base, "default", `{"batch":[{"sql":"CREATE TABLE counters(id TEXT PRIMARY KEY, count INTEGER NOT NULL)"},{"sql":"INSERT INTO counters VALUES ('count_up', 0)"}]}`); err != nil || code != 200 {
		t.Fatalf("create counters on a: %d %s %v", code, body, err)
	}
	b = startServe(t, bin, minio.Env(), "-data", t.TempDir(), "-replica", url, "-lease", "-lease-ttl", "2s")
	// b does not hold the lease: its requests are forwarded to a.
	if code, body, err := post(b.base, "default", `{"sql":"SELECT count FROM counters"}`); err != nil || code != 200 {
		t.Fatalf("read through b: %d %s %v\n%s", code, body, err, b.log.String())
	}
	return url, a, b, minio
}

// checkCounts: every returned count is distinct and within the final
// counter; exact: the counter equals the number of 2xx answers (after a
// kill -9, writes the dead leader uploaded but never answered count too).
func checkCounts(t *testing.T, url string, b *serveProc, counts []int64, exact bool) {
	t.Helper()
	seen := map[int64]bool{}
	for _, n := range counts {
		if seen[n] {
			t.Fatalf("count %d was returned twice: two writers applied increments to forked states", n)
		}
		seen[n] = true
	}
	// b may answer from its follower, which lags the bucket by a poll or
	// two: wait (bounded) until it shows what a fresh restore shows.
	restored := restoredInt(t, url, "SELECT count FROM counters")
	var final int64
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body, err := post(b.base, "default", `{"sql":"SELECT count FROM counters"}`)
		n, ok := firstInt(t, body)
		if err != nil || code != 200 || !ok {
			t.Fatalf("final read on b: %d %s %v", code, body, err)
		}
		final = n
		if n == restored || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if final < int64(len(counts)) || (exact && final != int64(len(counts))) {
		t.Fatalf("counter = %d, but %d increments were answered 2xx", final, len(counts))
	}
	for _, n := range counts {
		if n > final {
			t.Fatalf("count %d was acknowledged but the counter is %d: an acknowledged write was lost", n, final)
		}
	}
	if restored != final {
		t.Fatalf("a fresh restore shows %d, the server %d", restored, final)
	}
}

// A rolling deploy: two overlapping instances on one replica, the leader SIGTERMed
// mid-run. Nothing forks, nothing acknowledged is lost.
func TestServeOverlapSIGTERMHandsOver(t *testing.T) {
	url, a, b, _ := startPair(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	var counts []int64
	var failures int
	go func() { counts, failures = counterRun([]string{a.base, b.base}, stop); close(done) }()
	time.Sleep(time.Second)
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a did not exit after SIGTERM")
	}
	if a.err != nil {
		t.Fatalf("a exited with %v\n%s", a.err, a.log.String())
	}
	terminated := len(counts)
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	t.Logf("%d increments acknowledged (%d before a exited), %d failed", len(counts), terminated, failures)
	if len(counts) <= terminated+5 {
		t.Fatalf("b did not take over writes after a's SIGTERM\n--- b log:\n%s", b.log.String())
	}
	checkCounts(t, url, b, counts, true)
}

// kill -9 of the leader: b takes over once the lease expires; every
// acknowledged increment is in the bucket.
func TestServeOverlapKill9TakesOverAfterTTL(t *testing.T) {
	url, a, b, _ := startPair(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	var counts []int64
	go func() { counts, _ = counterRun([]string{a.base, b.base}, stop); close(done) }()
	time.Sleep(time.Second)
	a.cmd.Process.Kill()
	<-a.done
	killed := time.Now()
	deadline := killed.Add(15 * time.Second)
	for {
		code, _, err := post(b.base, "default", `{"sql":"SELECT 1"}`)
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not take over within 15s of kill -9\n%s", b.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("b answered %s after kill -9 (TTL 2s)", time.Since(killed).Round(10*time.Millisecond))
	time.Sleep(time.Second)
	close(stop)
	<-done
	checkCounts(t, url, b, counts, false)
}

// Read-your-writes through a non-leader: the bookmark of a write on the
// writer is reached by a read on the other instance. b, the newer
// instance, asked a for the lease at its first request and writes now.
func TestServeReadYourWritesOnNonLeader(t *testing.T) {
	url, older, newer, _ := startPair(t)
	waitHolder(t, url, newer)
	a, b := newer, older
	for i := 0; i < 20; i++ {
		resp, err := http.Post(a.base+"/v1/databases/default/query", "application/json", strings.NewReader(incrementSQL))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		bookmark := resp.Header.Get("Sluice-Bookmark")
		req, _ := http.NewRequest("POST", b.base+"/v1/databases/default/query", strings.NewReader(`{"sql":"SELECT count FROM counters"}`))
		req.Header.Set("Sluice-Bookmark", bookmark)
		r2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(r2)
		if r2.Header.Get("Sluice-Served-By") != "replica" {
			t.Fatalf("read %d on b was not served by b's follower", i)
		}
		n, ok := firstInt(t, body)
		if r2.StatusCode != 200 || !ok || n != int64(i+1) {
			t.Fatalf("read %d on b after write with bookmark %s: %d %s", i, bookmark, r2.StatusCode, body)
		}
		written, _ := strconv.ParseUint(bookmark, 10, 64)
		read, err := strconv.ParseUint(r2.Header.Get("Sluice-Bookmark"), 10, 64)
		if err != nil || written == 0 || read < written {
			t.Fatalf("b answered with bookmark %q, the write had %q", r2.Header.Get("Sluice-Bookmark"), bookmark)
		}
	}
}

// waitHolder waits until p holds the default database's lease.
func waitHolder(t *testing.T, url string, p *serveProc) {
	t.Helper()
	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	want := "-" + strconv.Itoa(p.cmd.Process.Pid) + "-"
	for deadline := time.Now().Add(15 * time.Second); ; {
		rec, _, err := lease.Read(context.Background(), replica.Sub(store, "default"))
		if err == nil && strings.Contains(rec.Holder, want) && !rec.Released() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the newer instance did not take the lease over: %+v %v\n%s", rec, err, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readAll(r *http.Response) string {
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// MinIO down for 10 s under load: writes fail clearly (5xx) while it is
// down, nothing acknowledged is lost, and the pair recovers by itself.
func TestServeOverlapSurvivesStoreOutage(t *testing.T) {
	url, a, b, minio := startPair(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	var counts []int64
	go func() { counts, _ = counterRun([]string{a.base, b.base}, stop); close(done) }()
	time.Sleep(500 * time.Millisecond)
	minio.Stop()
	time.Sleep(3 * time.Second) // past the lease TTL: writes must be failing now
	code, body, err := post(a.base, "default", incrementSQL)
	if err != nil || code < 500 {
		t.Errorf("a write with the store down answered %d %s %v, want a 5xx", code, body, err)
	}
	time.Sleep(7 * time.Second)
	if err := minio.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for {
		code, _, err := post(b.base, "default", incrementSQL)
		if err == nil && code == 200 {
			break
		}
		if time.Since(restarted) > 30*time.Second {
			t.Fatalf("writes did not recover within 30s of MinIO's restart\n--- a:\n%s\n--- b:\n%s", a.log.String(), b.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("writes recovered %s after MinIO restarted", time.Since(restarted).Round(10*time.Millisecond))
	close(stop)
	<-done
	// The probe increments are not recorded: the counter may exceed len(counts).
	checkCounts(t, url, b, counts, false)
}

// A leader that is shutting down keeps listening after it released its
// lease and forwards late writes to the instance taking over.
func TestServeSIGTERMForwardsLateWrites(t *testing.T) {
	url, a, b, _ := startPair(t)
	a.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(150 * time.Millisecond) // a is handing off: its leases are being released
	code, body, err := post(a.base, "default", `{"sql":"UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count"}`)
	if err != nil || code != 200 {
		t.Fatalf("late write to the leader being stopped: %d %s %v\n--- a log:\n%s", code, body, err, a.log.String())
	}
	n, ok := firstInt(t, body)
	if !ok || n != 1 {
		t.Fatalf("late write answered %q, want count 1", body)
	}
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("a did not exit after SIGTERM")
	}
	if a.err != nil {
		t.Fatalf("a exited with %v\n%s", a.err, a.log.String())
	}
	if !strings.Contains(a.log.String(), "forwarding late requests") {
		t.Fatalf("a never entered the hand-off:\n%s", a.log.String())
	}
	// The write went through b and is in the bucket.
	if got := restoredInt(t, url, "SELECT count FROM counters"); got != 1 {
		t.Fatalf("restored counter %d, want 1\n--- b log:\n%s", got, b.log.String())
	}
}
