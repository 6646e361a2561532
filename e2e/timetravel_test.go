package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// Time travel and branching through the binary, against MinIO with sync
// durability: a database written in several transactions is read at each
// earlier TXID and time through the JSON API and through @libsql/client
// (a /db/NAME@POINT/ URL), writes there are refused, points outside the
// history are a 422 naming what is available, 20 concurrent reads of a new
// point restore it once, and a branch at a past TXID is a database of its
// own: restoring both replicas gives each exactly its rows.
func TestTimeTravelReadsAndBranches(t *testing.T) {
	t.Parallel()
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	base := "http://" + host
	p := start(t, m.Env(), sluiceBin, "serve", "-durability", "sync", "-data", t.TempDir(),
		"-replica", m.URL(bucket, ""), "-listen", host, "-token", "rwtoken1:rw", "-token", "rotoken1:ro")
	waitUntil(t, 60*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)
	defer func() {
		if t.Failed() {
			t.Logf("sluice serve output:\n%s", lastLines(p.out.String(), 60))
		}
	}()
	const rw, ro = "rwtoken1", "rotoken1"

	if st, body := ttCall(t, "PUT", base+"/v1/databases/src", rw, ""); st != 201 {
		t.Fatalf("create src: %d %s", st, body)
	}
	ttQuery(t, base, "src", "", rw, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")

	// Five transactions of three rows; each point is the bookmark the write
	// was answered with and a time taken after its answer.
	type point struct {
		txid string
		at   time.Time
		ids  []int
	}
	var points []point
	var ids []int
	next := 1
	for tx := 0; tx < 5; tx++ {
		var stmts []string
		for i := 0; i < 3; i++ {
			stmts = append(stmts, fmt.Sprintf(`{"sql":"INSERT INTO t(id, v) VALUES (%d, 'tx%d')"}`, next, tx))
			ids = append(ids, next)
			next++
		}
		st, body, bm := ttRaw(t, "POST", base+"/v1/databases/src/query", rw, `{"batch":[`+strings.Join(stmts, ",")+`]}`)
		if st != 200 {
			t.Fatalf("write tx %d: %d %s", tx, st, body)
		}
		time.Sleep(20 * time.Millisecond)
		points = append(points, point{txid: bm, at: time.Now().UTC(), ids: append([]int(nil), ids...)})
		time.Sleep(20 * time.Millisecond)
	}

	// Each earlier point, by TXID and by time, through the JSON API and
	// through @libsql/client.
	checked := 0
	for i, pt := range points[:len(points)-1] {
		for _, at := range []string{pt.txid, pt.at.Format(time.RFC3339Nano)} {
			got, bm := ttIDs(t, base, "src", at, ro)
			if !reflect.DeepEqual(got, pt.ids) {
				t.Errorf("JSON API at %s (after tx %d): ids %v, want %v", at, i, got, pt.ids)
			}
			if bm != pt.txid {
				t.Errorf("JSON API at %s: bookmark %s, want %s", at, bm, pt.txid)
			}
			checked++
			out := runScript(t, target{kind: "sluice", http: base + "/db/src@" + at + "/", work: t.TempDir()},
				[]string{"NODE_PATH=" + filepath.Join(toolsDir(), "node_modules"), "LIBSQL_AUTH_TOKEN=" + rw}, "node", "timetravel/read.js")
			if got := jsonInts(out["ids"]); !reflect.DeepEqual(got, pt.ids) {
				t.Errorf("@libsql/client at %s: ids %v, want %v (%v)", at, got, pt.ids, out)
			}
			if got := jsonInts(out["batch"]); !reflect.DeepEqual(got, []int{len(pt.ids), pt.ids[len(pt.ids)-1]}) {
				t.Errorf("@libsql/client batch at %s: %v, want [%d %d]", at, out["batch"], len(pt.ids), pt.ids[len(pt.ids)-1])
			}
			if w := fmt.Sprint(out["write"]); !strings.Contains(w, "READONLY") {
				t.Errorf("@libsql/client write at %s: %s, want a SQLITE_READONLY refusal", at, w)
			}
			checked++
			out = runScript(t, target{kind: "sluice", http: "ws://" + host + "/db/src@" + at + "/", work: t.TempDir()},
				[]string{"NODE_PATH=" + filepath.Join(toolsDir(), "node_modules"), "LIBSQL_AUTH_TOKEN=" + rw}, "node", "timetravel/read.js")
			if got := jsonInts(out["ids"]); !reflect.DeepEqual(got, pt.ids) {
				t.Errorf("@libsql/client over WebSocket at %s: ids %v, want %v (%v)", at, got, pt.ids, out)
			}
			if got := jsonInts(out["batch"]); !reflect.DeepEqual(got, []int{len(pt.ids), pt.ids[len(pt.ids)-1]}) {
				t.Errorf("@libsql/client over WebSocket, batch at %s: %v", at, out["batch"])
			}
			if w := fmt.Sprint(out["write"]); !strings.Contains(w, "READONLY") {
				t.Errorf("@libsql/client over WebSocket, write at %s: %s, want a SQLITE_READONLY refusal", at, w)
			}
			checked++
		}
	}
	t.Logf("%d past points checked (%d each through the JSON API, @libsql/client over HTTP and over WebSocket)", checked, checked/3)

	// sluice sql takes the same URL form.
	for _, pt := range points[:len(points)-1] {
		out := mustSluice(t, nil, "sql", "-token", ro, base+"/db/src@"+pt.txid+"/", "SELECT group_concat(id, '+') FROM (SELECT id FROM t ORDER BY id)")
		want := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(pt.ids)), "+"), "[]")
		if !strings.Contains(out, " "+want+" ") {
			t.Errorf("sluice sql at TXID %s: %q, want the ids %s", pt.txid, out, want)
		}
	}
	if out, err := sluice(t, nil, "sql", "-token", rw, base+"/db/src@"+points[0].txid+"/", "INSERT INTO t(v) VALUES ('x')"); err == nil || !strings.Contains(out, "SQLITE_READONLY") {
		t.Errorf("sluice sql write at a past point: %v %s, want SQLITE_READONLY", err, out)
	}

	// A write at a past point is refused, even with a read-write token.
	if st, body := ttCall(t, "POST", base+"/v1/databases/src/query?at="+points[1].txid, rw, `{"sql":"INSERT INTO t(v) VALUES ('x')"}`); st != 403 || !strings.Contains(body, "SQLITE_READONLY") {
		t.Errorf("write at a past point: %d %s, want 403 SQLITE_READONLY", st, body)
	}
	// Points outside the history: a 422 naming what is available.
	for _, at := range []string{"2000-01-01T00:00:00Z", "999999", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)} {
		st, body := ttCall(t, "POST", base+"/v1/databases/src/query?at="+at, ro, `{"sql":"SELECT 1"}`)
		if st != 422 || !strings.Contains(body, "POINT_UNAVAILABLE") || !strings.Contains(body, "states available: TXID 1") {
			t.Errorf("point %s: %d %s, want 422 POINT_UNAVAILABLE naming the states available", at, st, body)
		}
	}
	if st, body := ttCall(t, "POST", base+"/v1/databases/src/query?at=yesterday", ro, `{"sql":"SELECT 1"}`); st != 400 {
		t.Errorf("a malformed point: %d %s, want 400", st, body)
	}
	if st, body := ttCall(t, "POST", base+"/v1/databases/nosuchdb/query?at=1", ro, `{"sql":"SELECT 1"}`); st != 404 {
		t.Errorf("a point of a missing database: %d %s, want 404", st, body)
	}

	// 20 concurrent reads of a point nobody read yet restore it once.
	ttQuery(t, base, "src", "", rw, "INSERT INTO t(id, v) VALUES (100, 'late')")
	_, _, fresh := ttRaw(t, "POST", base+"/v1/databases/src/query", rw, `{"sql":"INSERT INTO t(id, v) VALUES (101, 'late')"}`)
	want := append(append([]int(nil), ids...), 100, 101)
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body, _ := ttRaw(t, "POST", base+"/v1/databases/src/query?at="+fresh, ro, `{"sql":"SELECT id FROM t ORDER BY id"}`)
			if got := idsOf(body); st != 200 || !reflect.DeepEqual(got, want) {
				errs <- fmt.Sprintf("%d %v", st, body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent read at %s: %s", fresh, e)
	}
	// Reads are answered page by page while the state is restored: the
	// restore may end after them.
	restoredLine := regexp.MustCompile(`past state restored" db=src txid=` + fresh + ` `)
	waitUntil(t, 30*time.Second, func() bool { return restoredLine.MatchString(p.out.String()) }, p)
	builds := len(restoredLine.FindAllString(p.out.String(), -1))
	t.Logf("20 concurrent reads at TXID %s: %d restore(s)", fresh, builds)
	if builds != 1 {
		t.Errorf("20 concurrent reads of a new point restored it %d times, want 1", builds)
	}

	// Branch at a past TXID.
	at := points[2].txid
	if st, body := ttCall(t, "PUT", base+"/v1/databases/br", ro, `{"from":"src","at":"`+at+`"}`); st != 403 {
		t.Errorf("branch with a read-only token: %d %s, want 403", st, body)
	}
	if st, body := ttCall(t, "PUT", base+"/v1/databases/br", rw, `{"from":"nosuchdb"}`); st != 404 {
		t.Errorf("branch of a missing database: %d %s, want 404", st, body)
	}
	if st, body := ttCall(t, "PUT", base+"/v1/databases/br", rw, `{"from":"src","at":"`+at+`"}`); st != 201 {
		t.Fatalf("branch: %d %s", st, body)
	}
	// Durable before the 201: the branch's replica restores already.
	restoredIDs := func(db string) []int {
		out := filepath.Join(t.TempDir(), db+".db")
		mustSluice(t, m.Env(), "restore", "-o", out, m.URL(bucket, db))
		return fileIDs(t, out)
	}
	if got := restoredIDs("br"); !reflect.DeepEqual(got, points[2].ids) {
		t.Errorf("branch's replica right after the 201: ids %v, want %v", got, points[2].ids)
	}
	if st, body := ttCall(t, "PUT", base+"/v1/databases/br", rw, `{"from":"src"}`); st != 409 {
		t.Errorf("branch onto an existing database: %d %s, want 409", st, body)
	}
	if st, body := ttCall(t, "PUT", base+"/v1/databases/src", rw, `{"from":"br"}`); st != 409 {
		t.Errorf("branch onto the source: %d %s, want 409", st, body)
	}
	ttQuery(t, base, "br", "", rw, "INSERT INTO t(id, v) VALUES (1000, 'branch')")
	ttQuery(t, base, "src", "", rw, "INSERT INTO t(id, v) VALUES (2000, 'source')")
	wantBr := append(append([]int(nil), points[2].ids...), 1000)
	wantSrc := append(append([]int(nil), want...), 2000)
	if got, _ := ttIDs(t, base, "br", "", rw); !reflect.DeepEqual(got, wantBr) {
		t.Errorf("served branch: %v, want %v", got, wantBr)
	}
	gotBr, gotSrc := restoredIDs("br"), restoredIDs("src")
	if !reflect.DeepEqual(gotBr, wantBr) {
		t.Errorf("branch's replica: %v, want %v", gotBr, wantBr)
	}
	if !reflect.DeepEqual(gotSrc, wantSrc) {
		t.Errorf("source's replica: %v, want %v", gotSrc, wantSrc)
	}
	t.Logf("restored: source %d rows, branch %d rows (branched at TXID %s with %d)", len(gotSrc), len(gotBr), at, len(points[2].ids))

	// Deleting the source everywhere leaves the branch whole.
	if st, body := ttCall(t, "DELETE", base+"/v1/databases/src?purge=true", rw, ""); st/100 != 2 {
		t.Fatalf("delete src: %d %s", st, body)
	}
	// Its past states went with it, cached or not, and a database created
	// anew under its name is never answered from the old one's.
	if st, body := ttCall(t, "POST", base+"/v1/databases/src/query?at="+fresh, ro, `{"sql":"SELECT 1"}`); st != 404 {
		t.Errorf("a cached point of a purged database: %d %s, want 404", st, body)
	}
	if st, body := ttCall(t, "PUT", base+"/v1/databases/src", rw, ""); st != 201 {
		t.Fatalf("create src anew: %d %s", st, body)
	}
	ttQuery(t, base, "src", "", rw, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	ttQuery(t, base, "src", "", rw, "INSERT INTO t(id, v) VALUES (5000, 'new')")
	if got, _ := ttIDs(t, base, "src", "3", ro); !reflect.DeepEqual(got, []int{5000}) {
		t.Errorf("TXID 3 of the database created anew: %v, want [5000]", got)
	}
	ttQuery(t, base, "br", "", rw, "INSERT INTO t(id, v) VALUES (1001, 'branch')")
	wantBr = append(wantBr, 1001)
	if got := restoredIDs("br"); !reflect.DeepEqual(got, wantBr) {
		t.Errorf("branch's replica after the source was purged: %v, want %v", got, wantBr)
	}
}

// ttRaw sends a request with a bearer token; it returns the status, the
// body and the Sluice-Bookmark header.
func ttRaw(t *testing.T, method, url, token, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Sluice-Bookmark")
}

func ttCall(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	st, b, _ := ttRaw(t, method, url, token, body)
	return st, b
}

func ttQuery(t *testing.T, base, db, at, token, sqlText string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"sql": sqlText})
	url := base + "/v1/databases/" + db + "/query"
	if at != "" {
		url += "?at=" + at
	}
	st, body, _ := ttRaw(t, "POST", url, token, string(b))
	if st != 200 {
		t.Fatalf("%s on %s at %q: %d %s", sqlText, db, at, st, body)
	}
	return body
}

// ttIDs reads t's ids through the JSON API, at a point unless at is "".
func ttIDs(t *testing.T, base, db, at, token string) ([]int, string) {
	t.Helper()
	url := base + "/v1/databases/" + db + "/query"
	if at != "" {
		url += "?at=" + at
	}
	st, body, bm := ttRaw(t, "POST", url, token, `{"sql":"SELECT id FROM t ORDER BY id"}`)
	if st != 200 {
		t.Errorf("read %s at %q: %d %s", db, at, st, body)
	}
	return idsOf(body), bm
}

func idsOf(body string) []int {
	var r struct {
		Results []struct {
			Rows [][]any `json:"rows"`
		} `json:"results"`
	}
	if json.Unmarshal([]byte(body), &r) != nil || len(r.Results) == 0 {
		return nil
	}
	var out []int
	for _, row := range r.Results[0].Rows {
		f, _ := row[0].(float64)
		out = append(out, int(f))
	}
	return out
}

// jsonInts reads a script step's {"ok": [numbers]}.
func jsonInts(step any) []int {
	m, _ := step.(map[string]any)
	list, _ := m["ok"].([]any)
	var out []int
	for _, v := range list {
		f, _ := v.(float64)
		out = append(out, int(f))
	}
	return out
}

func fileIDs(t *testing.T, path string) []int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id FROM t ORDER BY id")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// A database whose early history retention deleted (a sidecar with short
// retention replicating into the bucket serve reads): a read at TXID 1 is a
// 422 naming the oldest state kept, and a read at that oldest state
// returns what `sluice restore -txid` rebuilds there.
func TestTimeTravelBeforeRetention(t *testing.T) {
	t.Parallel()
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	db := filepath.Join(t.TempDir(), "app.db")
	if err := writer(t, db, 5, 5, 0).wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms",
		"-l0-retention", "1s", "-retention", "2s", "-snapshot-interval", "1s", db, m.URL(bucket, "trimmed"))
	defer stopSidecar(t, side)
	time.Sleep(300 * time.Millisecond)
	if err := writer(t, db, 200, 5, time.Millisecond).wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}

	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	base := "http://" + host
	p := start(t, m.Env(), sluiceBin, "serve", "-durability", "sync", "-data", t.TempDir(),
		"-replica", m.URL(bucket, ""), "-listen", host)
	waitUntil(t, 60*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)

	// Level-1 compaction and retention run on 30 s boundaries; until
	// retention deleted TXID 1, sluice restore -txid 1 succeeds.
	deadline := time.Now().Add(3 * time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		if _, err := sluice(t, m.Env(), "restore", "-q", "-txid", "1", "-o", filepath.Join(t.TempDir(), fmt.Sprint(i)+".db"), m.URL(bucket, "trimmed")); err != nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	oldest := regexp.MustCompile(`states available: TXID (\d+) \(`)
	st, body := ttCall(t, "POST", base+"/v1/databases/trimmed/query?at=1", "", `{"sql":"SELECT count(*) FROM t"}`)
	mo := oldest.FindStringSubmatch(body)
	if st != 422 || !strings.Contains(body, "before the oldest state retention kept") || mo == nil || mo[1] == "1" {
		t.Fatalf("a read at TXID 1 after retention: %d %s, want 422 naming the oldest state kept", st, body)
	}
	t.Logf("read at TXID 1 after retention: %d %s", st, body)

	out := filepath.Join(t.TempDir(), "at-oldest.db")
	mustSluice(t, m.Env(), "restore", "-txid", mo[1], "-o", out, m.URL(bucket, "trimmed"))
	want, _, _ := dbDigest(t, out)
	st, body = ttCall(t, "POST", base+"/v1/databases/trimmed/query?at="+mo[1], "", `{"sql":"SELECT count(*) FROM t"}`)
	var r struct {
		Results []struct {
			Rows [][]int64 `json:"rows"`
		} `json:"results"`
	}
	if st != 200 || json.Unmarshal([]byte(body), &r) != nil || len(r.Results) != 1 || r.Results[0].Rows[0][0] != want {
		t.Fatalf("read at the oldest state kept, TXID %s: %d %s; want %d rows as sluice restore -txid gives", mo[1], st, body, want)
	}
	t.Logf("oldest state kept: TXID %s, %d rows (as sluice restore -txid)", mo[1], want)
}
