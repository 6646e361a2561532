package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

// A level-0 object that compaction had not merged yet is damaged while
// serve is stopped (one byte flipped, cut in half, or deleted from the
// middle of the history). After the restart the damage is reported by name
// on /ready, the writer heals the replica with a snapshot of its local
// database and keeps taking writes, `sluice verify` names the object before
// the heal and passes after it, and a restore of the latest state holds
// every acknowledged write.
func TestServeHealsDamagedLevel0Object(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"flip", "truncate", "delete"} {
		t.Run(damage, func(t *testing.T) { healCase(t, damage) })
	}
}

func healCase(t *testing.T, damage string) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	data := t.TempDir()
	dbURL := m.URL(bucket, "app")
	// The first run does not compact: every write stays a level-0 object,
	// as when serve stops before compaction merged them.
	noCompaction := writeFile(t, t.TempDir(), "serve.yml", "compaction:\n  disabled: true\n")

	serve := func(extra ...string) (*process, string) {
		port := testenv.FreePort()
		host := fmt.Sprintf("127.0.0.1:%d", port)
		args := append([]string{"serve", "-durability", "sync", "-data", data, "-replica", m.URL(bucket, ""), "-listen", host}, extra...)
		return start(t, m.Env(), sluiceBin, args...), "http://" + host
	}
	p, base := serve("-config", noCompaction)
	waitUntil(t, 60*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)
	if code, body := call(base, "PUT", "/v1/databases/app", ""); code/100 != 2 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := call(base, "POST", "/v1/databases/app/query", `{"sql":"CREATE TABLE t (id INTEGER PRIMARY KEY)"}`); code != 200 {
		t.Fatalf("create table: %d %s", code, body)
	}
	var acked []int
	for id := 1; id <= 60; id++ {
		if code, _ := call(base, "POST", "/v1/databases/app/query", fmt.Sprintf(`{"sql":"INSERT INTO t (id) VALUES (%d)"}`, id)); code == 200 {
			acked = append(acked, id)
		}
	}
	stopServe(t, p)
	ackedBefore := len(acked)

	// Damage one level-0 object in the middle of the history.
	ctx := context.Background()
	store, err := replicaurl.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l0, err := replica.ListLTX(ctx, store, 0)
	if err != nil || len(l0) < 40 {
		t.Fatalf("level 0 holds %d objects (%v), want one per write", len(l0), err)
	}
	victim := l0[len(l0)/2]
	switch damage {
	case "flip", "truncate":
		body := getObject(t, store, victim.Key)
		if damage == "flip" {
			body[len(body)/2] ^= 0x01
		} else {
			body = body[:len(body)/2]
		}
		if _, err := store.Put(ctx, victim.Key, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	case "delete":
		if err := store.Delete(ctx, victim.Key); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: damaged %s (TXID %d) after %d acknowledged writes", damage, victim.Key, victim.MinTXID, ackedBefore)

	// verify names it while nothing healed it.
	out, err := sluice(t, m.Env(), "verify", "-q", dbURL)
	if err == nil || !strings.Contains(out, victim.Key) {
		t.Fatalf("verify before the heal: want a failure naming %s, got err=%v:\n%s", victim.Key, err, out)
	}

	// Restart (compaction on) and keep writing at once.
	restarted := time.Now()
	p, base = serve()
	waitUntil(t, 30*time.Second, func() bool { return readyCode(base+"/health") == 200 }, p)
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	refused := 0
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := 1000 + w; ; id += 4 {
				select {
				case <-stop:
					return
				default:
				}
				code, _ := call(base, "POST", "/v1/databases/app/query", fmt.Sprintf(`{"sql":"INSERT INTO t (id) VALUES (%d)"}`, id))
				mu.Lock()
				if code == 200 {
					acked = append(acked, id)
				} else {
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	// /ready names the object (503 while it waits for the heal; the heal
	// itself is recorded in the body once done).
	var saw503, sawHeal time.Duration
	var healBody string
	for time.Since(restarted) < 5*time.Second && sawHeal == 0 {
		code, body := call(base, "GET", "/ready", "")
		if code == 503 && strings.Contains(body, victim.Key) && saw503 == 0 {
			saw503 = time.Since(restarted)
		}
		if code == 200 && strings.Contains(body, `"last_heal"`) && strings.Contains(body, victim.Key) {
			sawHeal, healBody = time.Since(restarted), body
		}
		time.Sleep(5 * time.Millisecond)
	}
	if sawHeal == 0 {
		close(stop)
		wg.Wait()
		t.Fatalf("/ready did not report the damaged %s and its heal within 5 s of the restart:\n%s", victim.Key, p.out.String())
	}
	time.Sleep(3 * time.Second) // writes go on after the heal
	close(stop)
	wg.Wait()
	mu.Lock()
	ackedAfter := len(acked) - ackedBefore
	mu.Unlock()
	if ackedAfter < 20 {
		t.Fatalf("only %d writes acknowledged after the restart (%d refused):\n%s", ackedAfter, refused, p.out.String())
	}
	var ready struct {
		LastHeal struct {
			Snapshot string  `json:"snapshot"`
			Seconds  float64 `json:"seconds_from_detection"`
		} `json:"last_heal"`
	}
	_ = json.Unmarshal([]byte(healBody), &ready)
	if n := strings.Count(p.out.String(), "replica object damaged"); n != 1 {
		t.Errorf("want one log line reporting the damage, got %d:\n%s", n, p.out.String())
	}
	stopServe(t, p)

	// verify passes now; the damaged range is listed, the newest state restores.
	out = mustSluice(t, m.Env(), "verify", "-q", dbURL)
	if !strings.Contains(out, "OK") {
		t.Fatalf("verify after the heal:\n%s", out)
	}
	var vr struct {
		OK           bool
		Unrestorable []struct {
			From ltx.TXID `json:"from_txid"`
			To   ltx.TXID `json:"to_txid"`
		} `json:"unrestorable"`
		MovedAside []string `json:"moved_aside"`
	}
	if err := json.Unmarshal([]byte(mustSluice(t, m.Env(), "verify", "-q", "-json", dbURL)), &vr); err != nil || !vr.OK ||
		len(vr.Unrestorable) == 0 || vr.Unrestorable[0].From != victim.MinTXID {
		t.Errorf("verify -json after the heal: %+v (%v); want ok and TXIDs from %d listed as not restorable", vr, err, victim.MinTXID)
	}
	if damage != "delete" {
		if len(vr.MovedAside) != 1 || !strings.HasSuffix(vr.MovedAside[0], victim.Key) {
			t.Errorf("verify -json lists %v moved aside, want %s", vr.MovedAside, victim.Key)
		}
		if _, err := store.Stat(ctx, "sluice/damaged/"+victim.Key); err != nil {
			t.Errorf("the damaged object was not moved aside: %v", err)
		}
	}
	// A point inside the range the damage made unrecoverable fails by name.
	out, err = sluice(t, m.Env(), "restore", "-txid", fmt.Sprint(uint64(victim.MinTXID)), "-o", filepath.Join(t.TempDir(), "x.db"), dbURL)
	if err == nil || !strings.Contains(out, fmt.Sprintf("(%d)", uint64(victim.MinTXID))) {
		t.Errorf("restore inside the damaged range: want a failure naming TXID %d, got err=%v:\n%s", victim.MinTXID, err, out)
	}

	restored := filepath.Join(t.TempDir(), "restored.db")
	mustSluice(t, m.Env(), "restore", "-integrity-check", "-o", restored, dbURL)
	have := rowIDs(t, restored)
	missing := 0
	for _, id := range acked {
		if !have[id] {
			missing++
		}
	}
	t.Logf("%s: /ready 503 naming it at %s (0: not caught between polls), healed by %s at %s after the restart (%.3fs from detection); "+
		"acknowledged %d before + %d after the restart (%d refused), restored %d rows, %d acknowledged missing",
		damage, saw503.Round(time.Millisecond), ready.LastHeal.Snapshot, sawHeal.Round(time.Millisecond), ready.LastHeal.Seconds,
		ackedBefore, ackedAfter, refused, len(have), missing)
	if missing > 0 {
		t.Fatalf("%d acknowledged writes are not in the restored database", missing)
	}
}

func stopServe(t *testing.T, p *process) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("serve: %v\n%s", err, p.out.String())
	}
}

func call(base, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getObject(t *testing.T, store replica.Store, key string) []byte {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rowIDs(t *testing.T, path string) map[int]bool {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

// Without the local file (a new machine), nothing can heal a damaged
// object no other level covers: the restore on open fails naming it, and
// /ready says so too instead of staying 200.
func TestServeRestoreOnOpenReportsDamage(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	data := t.TempDir()
	noCompaction := writeFile(t, t.TempDir(), "serve.yml", "compaction:\n  disabled: true\n")
	serve := func(dir string, extra ...string) (*process, string) {
		host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
		args := append([]string{"serve", "-data", dir, "-replica", m.URL(bucket, ""), "-listen", host}, extra...)
		return start(t, m.Env(), sluiceBin, args...), "http://" + host
	}
	p, base := serve(data, "-config", noCompaction)
	waitUntil(t, 60*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)
	call(base, "PUT", "/v1/databases/app", "")
	call(base, "POST", "/v1/databases/app/query", `{"sql":"CREATE TABLE t (id INTEGER PRIMARY KEY)"}`)
	for id := 1; id <= 10; id++ {
		call(base, "POST", "/v1/databases/app/query", fmt.Sprintf(`{"sql":"INSERT INTO t (id) VALUES (%d)"}`, id))
	}
	stopServe(t, p)
	ctx := context.Background()
	store, err := replicaurl.Open(ctx, m.URL(bucket, "app"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l0, _ := replica.ListLTX(ctx, store, 0)
	victim := l0[len(l0)/2]
	body := getObject(t, store, victim.Key)
	body[len(body)/2] ^= 1
	if _, err := store.Put(ctx, victim.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}

	p, base = serve(t.TempDir()) // a fresh disk: the database must be restored
	restarted := time.Now()
	waitUntil(t, 30*time.Second, func() bool { return readyCode(base+"/health") == 200 }, p)
	if code, out := call(base, "POST", "/v1/databases/app/query", `{"sql":"SELECT count(*) FROM t"}`); code != 503 || !strings.Contains(out, victim.Key) {
		t.Fatalf("read of a database whose restore meets damage: %d %s; want 503 naming %s", code, out, victim.Key)
	}
	var ready string
	waitUntil(t, 5*time.Second, func() bool {
		code, out := call(base, "GET", "/ready", "")
		ready = out
		return code == 503 && strings.Contains(out, victim.Key)
	}, p)
	t.Logf("/ready 503 naming %s %s after the restart: %s", victim.Key, time.Since(restarted).Round(time.Millisecond), strings.TrimSpace(ready))
}
