package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// keyedPost sends body with an Idempotency-Key; err is a transport error
// (the server is down).
func keyedPost(base, key, body string) (int, http.Header, string, error) {
	req, _ := http.NewRequest("POST", base+"/v1/databases/default/query", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: 40 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, readAll(resp), nil
}

// retryLog is what the clients saw, for the test's assertions.
type retryLog struct {
	mu         sync.Mutex
	notDurable []string // bodies of COMMITTED_NOT_DURABLE answers
	badRetry   []string // such answers carrying Retry-After or no bookmark
	replayed   int
	keys       int
}

// The retry contract through the binary: clients insert rows, each with its
// own Idempotency-Key, and retry every key until it is answered 200 —
// whatever the answer was (5xx, COMMITTED_NOT_DURABLE, connection refused).
// Meanwhile MinIO stops and restarts, and the server is killed with -9 and
// restarted on an empty data directory (restored from the bucket). The
// bucket must end with exactly one row per key.
func TestServeIdempotencyKeyRetriesThroughOutageAndKill9(t *testing.T) {
	minio := testenv.MinIO(t)
	url := minio.URL(minio.NewBucket(t), "srv")
	bin := buildSluice(t)
	tmp := t.TempDir()
	if out, err := exec.Command(bin, "serve", "-idempotency-window", "-1s", "-data", tmp, "-replica", "file://"+tmp+"/r").CombinedOutput(); err == nil || !strings.Contains(string(out), "-idempotency-window -1s: give a positive duration") {
		t.Fatalf("a negative -idempotency-window was accepted or unexplained: %v\n%s", err, out)
	}
	dataDir := t.TempDir()
	args := []string{"-data", dataDir, "-replica", url}
	srv := startServe(t, bin, minio.Env(), args...)
	var baseMu sync.Mutex
	base := srv.base
	currentBase := func() string { baseMu.Lock(); defer baseMu.Unlock(); return base }
	if code, body, err := post(base, "default", `{"sql":"CREATE TABLE t(k TEXT NOT NULL, n INTEGER)"}`); err != nil || code != 200 {
		t.Fatalf("create table: %d %s %v", code, body, err)
	}

	var lg retryLog
	stop := make(chan struct{})
	var wg sync.WaitGroup
	failures := make(chan string, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				body := fmt.Sprintf(`{"sql":"INSERT INTO t VALUES ('%s', %d)"}`, key, i)
				deadline := time.Now().Add(90 * time.Second)
				for {
					code, hdr, resp, err := keyedPost(currentBase(), key, body)
					if err == nil && code == 200 {
						lg.mu.Lock()
						lg.keys++
						if hdr.Get("Idempotent-Replayed") == "true" {
							lg.replayed++
						}
						lg.mu.Unlock()
						break
					}
					if err == nil && strings.Contains(resp, "COMMITTED_NOT_DURABLE") {
						lg.mu.Lock()
						lg.notDurable = append(lg.notDurable, resp)
						if code != 500 || hdr.Get("Retry-After") != "" || hdr.Get("Sluice-Bookmark") == "" {
							lg.badRetry = append(lg.badRetry, fmt.Sprintf("%d Retry-After=%q bookmark=%q %s", code, hdr.Get("Retry-After"), hdr.Get("Sluice-Bookmark"), resp))
						}
						lg.mu.Unlock()
					}
					if err == nil && code/100 == 4 {
						failures <- fmt.Sprintf("key %s answered %d %s", key, code, resp)
						return
					}
					if time.Now().After(deadline) {
						failures <- fmt.Sprintf("key %s not answered 200 within 90s: %d %s %v", key, code, resp, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}

	waitFor := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s\n%s", what, timeout, srv.log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	keysSoFar := func() int { lg.mu.Lock(); defer lg.mu.Unlock(); return lg.keys }
	waitFor("first keyed writes", 20*time.Second, func() bool { return keysSoFar() >= 20 })

	// Outage: writes commit locally and are answered COMMITTED_NOT_DURABLE.
	minio.Stop()
	waitFor("a COMMITTED_NOT_DURABLE answer", 60*time.Second, func() bool {
		lg.mu.Lock()
		defer lg.mu.Unlock()
		return len(lg.notDurable) >= 4
	})
	lg.mu.Lock()
	var nd struct {
		Error struct{ Code, Bookmark string }
	}
	json.Unmarshal([]byte(lg.notDurable[0]), &nd)
	lg.mu.Unlock()
	if nd.Error.Code != "COMMITTED_NOT_DURABLE" || nd.Error.Bookmark == "" {
		t.Fatalf("not-durable answer without its bookmark: %+v", nd)
	}
	if err := minio.Start(); err != nil {
		t.Fatal(err)
	}
	// The bookmark of a not-durable answer becomes durable once the upload
	// succeeds again.
	waitFor("the not-durable bookmark to become durable", 60*time.Second, func() bool {
		resp, err := http.Get(currentBase() + "/v1/databases/default/bookmark/" + nd.Error.Bookmark)
		if err != nil {
			return false
		}
		var b struct{ Durable bool }
		json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		return b.Durable
	})
	after := keysSoFar()
	waitFor("keyed writes after the outage", 30*time.Second, func() bool { return keysSoFar() >= after+20 })

	// kill -9 while clients write; the new server starts on an empty data
	// directory and restores from the bucket.
	srv.cmd.Process.Kill()
	<-srv.done
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	srv = startServe(t, bin, minio.Env(), args...)
	baseMu.Lock()
	base = srv.base
	baseMu.Unlock()
	after = keysSoFar()
	waitFor("keyed writes after the restart", 30*time.Second, func() bool { return keysSoFar() >= after+20 })
	close(stop)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}

	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, b := range lg.badRetry {
		t.Errorf("COMMITTED_NOT_DURABLE must be 500 with a bookmark and no Retry-After: %s", b)
	}
	if lg.replayed == 0 {
		t.Errorf("no retry was answered from its stored answer (Idempotent-Replayed)")
	}
	t.Logf("%d keys, %d not-durable answers, %d replays", lg.keys, len(lg.notDurable), lg.replayed)

	// Exactly one row per key, in the bucket.
	dups := restoredInt(t, url, "SELECT count(*) FROM (SELECT k FROM t GROUP BY k HAVING count(*) > 1)")
	rows := restoredInt(t, url, "SELECT count(*) FROM t")
	distinct := restoredInt(t, url, "SELECT count(DISTINCT k) FROM t")
	if dups != 0 || rows != distinct || rows != int64(lg.keys) {
		t.Fatalf("bucket holds %d rows for %d distinct keys (%d keys duplicated); clients got 200 for %d keys\n%s",
			rows, distinct, dups, lg.keys, srv.log.String())
	}
}
