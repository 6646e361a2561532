package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// An embedded replica whose sync URL asks to wait (…/db/NAME/wait/5s/)
// follows the primary: a sync() with nothing new is answered when the
// next transaction is shipped, carrying it, and the request the client
// sends next in the same sync() is answered at once. Without the segment,
// a sync with nothing new is still one request answered at once. The real
// clients bootstrap, write through and sync through the waiting URL, and
// hold every acknowledged row.
func TestEmbeddedReplicaSyncWaitsForTheNextTransaction(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	embeddedServe(t, m.Env(), t.TempDir(), m.URL(bucket, ""), host, "")
	base := "http://" + host
	embCreate(t, host)
	embQuery(t, host, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	embQuery(t, host, "INSERT INTO t(v) VALUES ('first')")

	// One connection, as libSQL's client keeps one.
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	get := func(path string) (int, string, int, time.Duration) {
		t.Helper()
		r, _ := http.NewRequest("GET", base+path, nil)
		r.Header.Set("Authorization", "Bearer "+embRO)
		start := time.Now()
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 == 4 && resp.Header.Get("Sluice-Sync-Answer") == "" {
			return resp.StatusCode, string(raw), len(raw), time.Since(start)
		}
		return resp.StatusCode, resp.Header.Get("Sluice-Sync-Answer"), len(raw), time.Since(start)
	}
	var info struct {
		Gen uint64 `json:"current_generation"`
	}
	{
		r, _ := http.NewRequest("GET", base+"/db/app/info", nil)
		r.Header.Set("Authorization", "Bearer "+embRO)
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(raw, &info); err != nil || info.Gen == 0 {
			t.Fatalf("/info: %v %s", err, raw)
		}
	}
	g := info.Gen // a replica bootstrapped here is up to date

	// Not asked to wait: answered at once.
	if code, answer, _, took := get(fmt.Sprintf("/db/app/sync/%d/1/2", g)); code != 400 || answer != "end" || took > 2*time.Second {
		t.Fatalf("a sync with nothing new: %d %q after %s, want end of generation at once", code, answer, took)
	}

	// Asked to wait: answered when the next write is shipped.
	type answer struct {
		code   int
		kind   string
		n      int
		at     time.Time
		waited time.Duration
	}
	got := make(chan answer, 1)
	go func() {
		code, kind, n, took := get(fmt.Sprintf("/db/app/wait/5s/sync/%d/1/2", g))
		got <- answer{code, kind, n, time.Now(), took}
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case a := <-got:
		t.Fatalf("a waiting sync answered before anything was written: %+v", a)
	default:
	}
	embQuery(t, host, "INSERT INTO t(v) VALUES ('second')")
	acked := time.Now()
	a := <-got
	if a.code != 200 || a.kind != "diff" || a.n == 0 || a.n%(24+4096) != 0 {
		t.Fatalf("the waiting sync after a write: %d %q %d bytes, want the changed pages", a.code, a.kind, a.n)
	}
	if after := a.at.Sub(acked); after > 1500*time.Millisecond || a.waited >= 5*time.Second {
		t.Fatalf("the waiting sync answered %s after the write's acknowledgement (it waited %s in all)", after, a.waited)
	}
	frames := a.n / (24 + 4096)
	t.Logf("a waiting sync answered %s after the write's acknowledgement, %d frames", a.at.Sub(acked).Round(time.Millisecond), frames)

	// The client's next request in the same sync() is answered at once,
	// though its URL asks to wait: sync() returns with the write.
	cont := fmt.Sprintf("/db/app/wait/5s/sync/%d/%d/%d", g, 1+frames, 2+frames)
	if code, kind, _, took := get(cont); code != 400 || kind != "end" || took > 2*time.Second {
		t.Fatalf("the request after the frames: %d %q after %s, want end of generation at once", code, kind, took)
	}
	// The next sync() at the same point waits (here for its whole wait).
	if code, kind, _, took := get(strings.Replace(cont, "/wait/5s/", "/wait/1s/", 1)); code != 400 || kind != "end" || took < 900*time.Millisecond {
		t.Fatalf("the next sync() with nothing new: %d %q after %s, want end of generation after its 1 s wait", code, kind, took)
	}
	// A wait that is not a duration, or too long, is refused in one line.
	if code, msg, _, _ := get("/db/app/wait/forever/info"); code != 400 || !strings.Contains(msg, "/wait/5s/") {
		t.Fatalf("a bad wait: %d %s", code, msg)
	}

	// The real clients through the waiting URL: bootstrap, a write sent
	// through (Hrana at the same URL), syncs while a writer inserts; every
	// acknowledged row is on the replica.
	url := base + "/db/app/wait/1s/"
	for _, c := range replicaClients() {
		t.Run(c.name, func(t *testing.T) {
			local := filepath.Join(t.TempDir(), "local.db")
			r := c.run(t, local, url, embRW, "write", "through-"+c.name)
			if r.Error != "" || r.Integrity != "ok" {
				t.Fatalf("write through the waiting URL: %+v", r)
			}
			sameRows(t, "after a write through the waiting URL", r.Rows, embQuery(t, host, "SELECT id, v FROM t ORDER BY id"))
			var wg sync.WaitGroup
			wg.Add(1)
			acked := 0
			var werr error
			go func() {
				defer wg.Done()
				for i := range 20 {
					body := fmt.Sprintf(`{"sql":"INSERT INTO t(v) VALUES ('%s-while-syncing-%d')"}`, c.name, i)
					r, _ := http.NewRequest("POST", base+"/v1/databases/app/query", strings.NewReader(body))
					r.Header.Set("Authorization", "Bearer "+embRW)
					resp, err := http.DefaultClient.Do(r)
					if err != nil {
						werr = err
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						werr = fmt.Errorf("insert %d: %s", i, resp.Status)
						return
					}
					acked++
					time.Sleep(20 * time.Millisecond)
				}
			}()
			r = c.run(t, local, url, embRO, "sync")
			wg.Wait()
			if r.Error != "" || werr != nil {
				t.Fatalf("sync while writing: %s; the writer: %v", r.Error, werr)
			}
			r = c.run(t, local, url, embRO, "sync")
			server := embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
			sameRows(t, "after the writer stopped", r.Rows, server)
			t.Logf("%d rows acknowledged while syncing; the replica holds %d of the server's %d rows", acked, len(r.Rows), len(server))
		})
	}
}
