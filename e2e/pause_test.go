package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluicedb/sluice/lease"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

// pauseCycles is how many times the lease holder is paused past its TTL.
const pauseCycles = 10

// A lease holder paused (SIGSTOP) past its TTL while writes go on through
// the other instance, then resumed: what it uploads late is never
// acknowledged, and the new holder adopts it rather than stopping.
func TestPausedHolderNeverAcknowledgesAfterLosingItsLease(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	const ttl = 2 * time.Second
	var ins []*instance
	for i := 0; i < 2; i++ {
		data, port := t.TempDir(), testenv.FreePort()
		// No route between them (as between Cloud Run revisions): a write
		// to the instance without the lease waits for it or is answered 503.
		in := startProc(t, fmt.Sprintf("instance-%d", i), m.Env(), "serve", "-data", data, "-replica", url,
			"-addr", "127.0.0.1:"+strconv.Itoa(port), "-token", overlapToken, "-lease-ttl", ttl.String(), "-advertise", "http://127.0.0.1:9")
		in.base, in.data = "http://127.0.0.1:"+strconv.Itoa(port), data
		waitHTTP(t, in, in.base+"/health")
		ins = append(ins, in)
	}
	if _, err := pauseQuery(context.Background(), ins[0],
		`{"batch":[{"sql":"CREATE TABLE counters(id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"},{"sql":"INSERT INTO counters VALUES (1, 0)"}]}`); err != nil {
		t.Fatal(err)
	}
	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	db := replica.Sub(store, "default")

	stop := make(chan struct{})
	var mu sync.Mutex
	var answers []pauseAnswer
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				in := ins[w%2] // three clients per instance: the holder is always uploading
				a, _ := pauseQuery(context.Background(), in, `{"sql":"UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n"}`)
				a.inst = in.name
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if a.status != 200 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	var pauses []string
	for cycle := 0; cycle < pauseCycles; cycle++ {
		time.Sleep(1500 * time.Millisecond)
		// A hand-over in flight shows the lease released and reserved for the
		// instance that asked; it holds it within a renewal or two.
		var holder *instance
		var rec lease.Record
		for deadline := time.Now().Add(5 * ttl); holder == nil; {
			var pid int
			pid, rec = holderPID(context.Background(), db)
			for _, in := range ins {
				if in.cmd.Process.Pid == pid {
					holder = in
				}
			}
			if holder == nil && time.Now().After(deadline) {
				t.Fatalf("cycle %d: no instance holds the lease within %s (%+v)", cycle, 5*ttl, rec)
			}
			if holder == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
		_ = holder.cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(ttl + 1500*time.Millisecond)
		_ = holder.cmd.Process.Signal(syscall.SIGCONT)
		pauses = append(pauses, fmt.Sprintf("%s@epoch%d", holder.name, rec.Epoch))
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	// Who began each epoch, and at which TXID of the history: every TXID
	// after that belongs to that epoch's holder until the next one.
	type epoch struct {
		n    uint64
		inst string
		from uint64 // the replica's TXID when the holder opened the database
	}
	var epochs []epoch
	acquired := regexp.MustCompile(`msg="lease acquired".* epoch=(\d+)`)
	opened := regexp.MustCompile(`msg="opened database" db=default txid=(\d+)`)
	adoptions, late := 0, 0
	for _, in := range ins {
		var pending *epoch
		for _, line := range strings.Split(in.log.String(), "\n") {
			if m := acquired.FindStringSubmatch(line); m != nil {
				n, _ := strconv.ParseUint(m[1], 10, 64)
				pending = &epoch{n: n, inst: in.name}
			} else if m := opened.FindStringSubmatch(line); m != nil && pending != nil {
				pending.from, _ = strconv.ParseUint(m[1], 10, 64)
				epochs = append(epochs, *pending)
				pending = nil
			}
			if strings.Contains(line, "adopting it") {
				adoptions++
			}
		}
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i].n < epochs[j].n })
	owner := func(txid uint64) string {
		o := ""
		for _, e := range epochs {
			if e.from < txid {
				o = e.inst
			}
		}
		return o
	}
	seen := map[int64]string{}
	acks, retryable := 0, 0
	for _, a := range answers {
		if strings.Contains(strings.ToLower(a.body), "fenced") {
			t.Errorf("%s answered a fenced error: %s", a.inst, a.body)
		}
		switch {
		case a.status == 200:
			acks++
			if prev, dup := seen[a.v]; dup {
				t.Errorf("count %d acknowledged twice (by %s and %s)", a.v, prev, a.inst)
			}
			seen[a.v] = a.inst
			if o := owner(a.bookmark); o != a.inst {
				t.Errorf("%s acknowledged count %d at TXID %d, after %s took the lease at an earlier TXID (epochs %+v)",
					a.inst, a.v, a.bookmark, o, epochs)
			}
		case a.status == 503 && a.retryAfter != "":
			retryable++
		case strings.Contains(a.body, "lease deadline"):
			late++ // uploaded late: not acknowledged, not to be run again
		case a.status == 0:
		default:
			t.Errorf("%s answered %d %s", a.inst, a.status, a.body)
		}
	}
	final := restoredCounter(t, url, "default")
	for v := range seen {
		if v > final {
			t.Errorf("count %d was acknowledged but the restored counter is %d", v, final)
		}
	}
	if final < int64(acks) {
		t.Errorf("restored counter %d < %d acknowledged increments", final, acks)
	}
	if len(epochs) < pauseCycles+1 {
		t.Errorf("%d epochs began, want one per pause plus the first: %+v", len(epochs), epochs)
	}
	t.Logf("%d pauses (%s): %d epochs, %d increments acknowledged (restored counter %d), %d answered 503 + Retry-After, %d uploaded late and not acknowledged, %d late files adopted by the new holder",
		pauseCycles, strings.Join(pauses, " "), len(epochs), acks, final, retryable, late, adoptions)
	if t.Failed() {
		for _, in := range ins {
			t.Logf("--- %s:\n%s", in.name, in.log.String())
		}
	}
}

type pauseAnswer struct {
	inst       string
	status     int
	retryAfter string
	body       string
	v          int64
	bookmark   uint64
}

func pauseQuery(ctx context.Context, in *instance, body string) (pauseAnswer, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", in.base+"/v1/databases/default/query", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+overlapToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := overlapClient.Do(req)
	if err != nil {
		return pauseAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := pauseAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
	a.bookmark, _ = strconv.ParseUint(resp.Header.Get("Sluice-Bookmark"), 10, 64)
	if resp.StatusCode != 200 {
		return a, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var out struct {
		Results []struct {
			Rows [][]json.Number `json:"rows"`
		} `json:"results"`
	}
	if json.Unmarshal(b, &out) == nil && len(out.Results) > 0 && len(out.Results[0].Rows) > 0 {
		a.v, _ = out.Results[0].Rows[0][0].Int64()
	}
	return a, nil
}
