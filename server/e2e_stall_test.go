package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"context"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

// How fast the server tells the truth when something it depends on stops
// answering without failing: a store that hangs (MinIO paused with
// SIGSTOP, as a lost write quorum or a frozen VM behaves) and a lease holder
// that hangs (paused while another instance forwards to it).

// outcome is one write's answer.
type outcome struct {
	id         int
	sent, took time.Duration // since the test began
	status     int
	retryAfter string
	code       string
}

// postWrite sends one insert and reads the answer's status, Retry-After and
// error code.
func postWrite(client *http.Client, base string, id, w int) (status int, retryAfter, code string, err error) {
	body := fmt.Sprintf(`{"sql":"INSERT INTO t VALUES (?, ?)","params":[%d, %d]}`, id, w)
	resp, err := client.Post(base+"/v1/databases/default/query", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Code, nil
}

// TestServeHungStoreIsToldWithinSeconds: MinIO paused for 8 s under sync
// writes. /ready turns 503 within 5 s and stays so, every write sent meanwhile
// is answered within the write stall timeout plus a margin (503 with
// Retry-After and nothing committed, or COMMITTED_NOT_DURABLE for a write
// already committed), /ready is 200 within 2 s of MinIO resuming, writes
// succeed again, and a restore holds every acknowledged and every committed
// write and none that was refused.
func TestServeHungStoreIsToldWithinSeconds(t *testing.T) {
	minio := testenv.PrivateMinIO(t)
	for _, kv := range minio.Env() { // for the restore below
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	url := minio.URL(minio.NewBucket(t), "srv")
	bin := buildSluice(t)
	const writeStall = 3 * time.Second
	p := startServe(t, bin, minio.Env(), "-data", t.TempDir(), "-replica", url, "-write-stall-timeout", writeStall.String())
	if code, body, err := post(p.base, "default", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER)"}`); err != nil || code != 200 {
		t.Fatalf("create table: %d %s %v", code, body, err)
	}
	begin := time.Now()
	since := func() time.Duration { return time.Since(begin) }
	client := &http.Client{Timeout: 2 * time.Minute}

	// /ready, every 50 ms.
	type probe struct {
		at     time.Duration
		status int
	}
	var readyMu sync.Mutex
	var readies []probe
	stopReady := make(chan struct{})
	readyDone := make(chan struct{})
	go func() {
		defer close(readyDone)
		for {
			select {
			case <-stopReady:
				return
			case <-time.After(50 * time.Millisecond):
			}
			at := since()
			status := 0
			if resp, err := client.Get(p.base + "/ready"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
			}
			readyMu.Lock()
			readies = append(readies, probe{at, status})
			readyMu.Unlock()
		}
	}()

	var mu sync.Mutex
	var outcomes []outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := w*1_000_000 + i
				sent := since()
				status, ra, code, err := postWrite(client, p.base, id, w)
				if err != nil {
					t.Errorf("write %d: %v", id, err)
					return
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{id, sent, since() - sent, status, ra, code})
				mu.Unlock()
				if status != 200 {
					time.Sleep(100 * time.Millisecond) // as a client honouring Retry-After would, a little faster
				}
			}
		}()
	}

	time.Sleep(2 * time.Second)
	if err := minio.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := since()
	time.Sleep(8 * time.Second)
	if err := minio.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := since()
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	close(stopReady)
	<-readyDone

	// /ready: 503 within 5 s of the pause, 503 until the resume, 200 within 2 s after.
	var first503, first200 time.Duration = -1, -1
	for _, r := range readies {
		switch {
		case r.at < paused && r.status != 200 && r.at > paused-time.Second:
			t.Errorf("/ready %d at %s, before the pause", r.status, r.at)
		case r.at >= paused && r.at < resumed && r.status == 503 && first503 < 0:
			first503 = r.at
		case r.at >= paused && r.at < resumed && r.status == 200 && first503 >= 0:
			t.Errorf("/ready 200 at %s while MinIO was paused (503 since %s)", r.at, first503)
		case r.at >= resumed && r.status == 200 && first200 < 0:
			first200 = r.at
		}
	}
	if first503 < 0 || first503-paused > 5*time.Second {
		t.Errorf("/ready turned 503 %s after the pause, want within 5s", first503-paused)
	}
	if first200 < 0 || first200-resumed > 2*time.Second {
		t.Errorf("/ready turned 200 %s after the resume, want within 2s", first200-resumed)
	}

	// Every write sent while MinIO was paused is answered within the write
	// stall timeout and a margin, and says whether to retry.
	acked, committed, refused := map[int]bool{}, map[int]bool{}, map[int]bool{}
	var slowest time.Duration
	var refusedTook []time.Duration
	afterResume := 0
	for _, o := range outcomes {
		switch {
		case o.status == 200:
			acked[o.id] = true
			if o.sent > resumed+2*time.Second {
				afterResume++
			}
		case o.status == 503 && o.code == "UNAVAILABLE":
			refused[o.id] = true
			refusedTook = append(refusedTook, o.took)
			if o.retryAfter == "" {
				t.Errorf("write %d answered 503 without Retry-After", o.id)
			}
		case o.status == 500 && o.code == "COMMITTED_NOT_DURABLE":
			committed[o.id] = true
			if o.retryAfter != "" {
				t.Errorf("write %d answered COMMITTED_NOT_DURABLE with Retry-After: a blind retry would apply it twice", o.id)
			}
		default:
			t.Errorf("write %d sent at %s: %d %s after %s", o.id, o.sent, o.status, o.code, o.took)
		}
		// Writes pending at the pause or sent during it, early enough that
		// the resume cannot be what answered them.
		if limit := writeStall + 2*time.Second; o.sent+o.took > paused && o.sent < resumed-limit {
			slowest = max(slowest, o.took)
			if o.took > limit {
				t.Errorf("write %d sent %s after the pause answered %d %s after %s, want within %s", o.id, o.sent-paused, o.status, o.code, o.took, limit)
			}
		}
	}
	if len(refused) == 0 {
		t.Errorf("no write was refused (503) while MinIO was paused")
	}
	if afterResume == 0 {
		t.Errorf("no write acknowledged after MinIO resumed")
	}
	sort.Slice(refusedTook, func(i, j int) bool { return refusedTook[i] < refusedTook[j] })
	median := time.Duration(0)
	if len(refusedTook) > 0 {
		median = refusedTook[len(refusedTook)/2]
	}
	p.terminate(t)

	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "default"), out, restore.Options{IntegrityCheck: true}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	have := idsIn(t, out)
	for id := range acked {
		if !have[id] {
			t.Errorf("acknowledged write %d is not in the restored database", id)
		}
	}
	for id := range committed {
		if !have[id] {
			t.Errorf("write %d answered COMMITTED_NOT_DURABLE never shipped after MinIO resumed", id)
		}
	}
	for id := range refused {
		if have[id] {
			t.Errorf("write %d answered 503 (nothing committed) is in the restored database", id)
		}
	}
	t.Logf("/ready 503 %s after the pause, 200 %s after the resume; slowest answer during the pause %s; "+
		"writes: %d acknowledged (%d after the resume), %d COMMITTED_NOT_DURABLE, %d refused 503 (median %s); restored %d rows",
		first503-paused, first200-resumed, slowest, len(acked), afterResume, len(committed), len(refused), median, len(have))
}

// TestServeForwardTimeoutWithAPausedHolder: the lease holder paused with
// SIGSTOP still accepts connections (the kernel does), but never answers; a
// write sent to the other instance, which forwards it, is answered within
// -forward-timeout plus a margin, not the proxy's own minutes, and writes go
// through again once the holder resumes.
func TestServeForwardTimeoutWithAPausedHolder(t *testing.T) {
	minio := testenv.MinIO(t)
	url := minio.URL(minio.NewBucket(t), "srv")
	bin := buildSluice(t)
	const fwd = 3 * time.Second
	args := []string{"-replica", url, "-lease", "-lease-ttl", "60s", "-forward-timeout", fwd.String()}
	a := startServe(t, bin, minio.Env(), append([]string{"-data", t.TempDir()}, args...)...)
	if code, body, err := post(a.base, "default", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER)"}`); err != nil || code != 200 {
		t.Fatalf("create table on a: %d %s %v", code, body, err)
	}
	b := startServe(t, bin, minio.Env(), append([]string{"-data", t.TempDir()}, args...)...)
	client := &http.Client{Timeout: 2 * time.Minute}
	if status, _, code, err := postWrite(client, b.base, 1, 0); err != nil || status != 200 {
		t.Fatalf("write through b before the pause: %d %s %v\n%s", status, code, err, b.log.String())
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var took []string
	for i := 2; i <= 4; i++ {
		start := time.Now()
		status, _, code, err := postWrite(client, b.base, i, 0)
		d := time.Since(start)
		took = append(took, fmt.Sprintf("%d %s in %s", status, code, d.Round(time.Millisecond)))
		if err != nil {
			t.Fatalf("write %d through b to the paused holder: %v", i, err)
		}
		if d > fwd+1500*time.Millisecond {
			t.Errorf("write %d through b to the paused holder answered after %s, want within -forward-timeout %s + 1.5s", i, d, fwd)
		}
		if status != http.StatusGatewayTimeout {
			t.Errorf("write %d through b to the paused holder: %d %s, want 504", i, status, code)
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The resumed holder may first answer 503 with Retry-After (its own
	// store requests timed out while it was paused); a client retries.
	for try := 1; ; try++ {
		status, _, code, err := postWrite(client, b.base, 100, 0)
		if err == nil && status == 200 {
			break
		}
		if err != nil || status != 503 || try == 10 {
			t.Fatalf("write through b after the holder resumed (try %d): %d %s %v\n%s", try, status, code, err, a.log.String())
		}
		t.Logf("write through b after the holder resumed, try %d: %d %s", try, status, code)
		time.Sleep(time.Second)
	}
	t.Logf("writes forwarded to the paused holder (forward-timeout %s): %s", fwd, strings.Join(took, "; "))
}
