package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// A 200 MB database that exists only in the bucket answers point queries
// through the JSON API and @libsql/client while its restore is still under
// way (the store is slowed to 16 MB/s per response, so the whole file takes
// seconds and a page takes milliseconds; the local file does not exist yet
// when the answers come), with the rows a plain `sluice restore` holds. A
// kill -9 in the middle of that restore leaves no file that could pass for
// the database; the restarted server answers again, finishes, and its file
// has the same pages as the plain restore; a write then works as usual.
func TestColdOpenAnswersBeforeRestoreFinishes(t *testing.T) {
	const (
		rows = 50_000 // of ~3.3 KB, one per 4 KiB page: a ~205 MB database
		id   = 31_337
	)
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "big.db")
	seedColdDB(t, m, bucket, src, rows)

	// What a plain restore holds: the reference for every answer below.
	plain := filepath.Join(dir, "plain.db")
	mustSluice(t, m.Env(), "restore", "-q", "-o", plain, m.URL(bucket, "big"))
	want := coldExpected(t, plain, id)
	if fi, err := os.Stat(plain); err != nil || fi.Size() < 200e6 {
		t.Fatalf("plain restore: %v, %d bytes, want at least 200 MB", err, fi.Size())
	}

	slow := newSlowStore(t, m.Endpoint(), 16<<20)
	replicaURL := strings.Replace(m.URL(bucket, ""), url.QueryEscape(m.Endpoint()), url.QueryEscape(slow.URL), 1)
	data := t.TempDir()
	local := filepath.Join(data, "big.db")
	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	base := "http://" + host
	serve := func() *process {
		p := start(t, m.Env(), sluiceBin, "serve", "-durability", "sync", "-data", data,
			"-replica", replicaURL, "-listen", host, "-token", "rwtoken1:rw", "-lease-ttl", "2s")
		waitUntil(t, 60*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)
		return p
	}
	p := serve()
	defer func() {
		if t.Failed() {
			t.Logf("sluice serve output:\n%s", lastLines(p.out.String(), 40))
		}
	}()

	// The first query opens the database cold.
	start := time.Now()
	got := coldQuery(t, base, "SELECT id, v FROM t WHERE k = 'key-31337'")
	took := time.Since(start)
	if _, err := os.Stat(local); err == nil || strings.Contains(p.out.String(), "cold open: restored") {
		t.Fatalf("the restore finished before the first answer (%s): the test proves nothing; slow the store further", took)
	}
	if got != want["byKey"] {
		t.Fatalf("point query by key before the restore finished: %s, want %s", got, want["byKey"])
	}
	if got := coldQuery(t, base, fmt.Sprintf("SELECT k, v FROM t WHERE id = %d", id)); got != want["byId"] {
		t.Fatalf("point query by id: %s, want %s", got, want["byId"])
	}
	out := runScript(t, target{kind: "sluice", http: base + "/db/big/", work: t.TempDir()},
		[]string{"NODE_PATH=" + filepath.Join(toolsDir(), "node_modules"), "LIBSQL_AUTH_TOKEN=rwtoken1",
			"KEY=key-31337", fmt.Sprintf("ID=%d", id)}, "node", "coldopen/read.js")
	if _, err := os.Stat(local); err == nil || strings.Contains(p.out.String(), "cold open: restored") {
		t.Fatalf("the restore finished before @libsql/client's answers: the test proves nothing; slow the store further")
	}
	for _, step := range []string{"byKey", "byId", "range"} {
		b, _ := json.Marshal(out[step].(map[string]any)["ok"])
		if string(b) != want["js."+step] {
			t.Errorf("@libsql/client %s before the restore finished: %s, want %s (%v)", step, b, want["js."+step], out[step])
		}
	}
	t.Logf("first point query answered in %s through a 16 MB/s store, before the restore of %d MB finished (%d GETs, %d MB so far)",
		took, fileSize(t, plain)>>20, slow.gets.Load(), slow.bytes.Load()>>20)
	// /metrics shows it: one database restoring while it answers, pages fetched.
	_, metricsText, _ := ttRaw(t, "GET", base+"/metrics", "rwtoken1", "")
	for _, want := range []string{"sluice_cold_open_hydrating 1", "sluice_cold_open_views 1"} {
		if !strings.Contains(metricsText, want+"\n") {
			t.Errorf("/metrics during the cold open lacks %q:\n%s", want, coldMetrics(metricsText))
		}
	}
	if !strings.Contains(metricsText, "sluice_cold_open_pages_fetched ") || strings.Contains(metricsText, "sluice_cold_open_pages_fetched 0\n") {
		t.Errorf("/metrics shows no page fetched on demand:\n%s", coldMetrics(metricsText))
	}
	t.Logf("/metrics during the cold open:\n%s", coldMetrics(metricsText))

	// kill -9 in the middle of the restore: nothing at the database's path.
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.wait(t, 10*time.Second)
	if strings.Contains(p.out.String(), "cold open: restored") {
		t.Fatal("the restore finished before the kill: the test proves nothing")
	}
	if _, err := os.Stat(local); err == nil {
		t.Fatalf("%s exists after a kill -9 in the middle of its restore", local)
	}
	left, _ := filepath.Glob(filepath.Join(data, "*.db"))
	if len(left) != 0 {
		t.Fatalf("files that look like databases after the kill: %v", left)
	}

	// Restarted once the killed instance's lease expired (else reads go to
	// a follower while the new instance waits for it): answers again at
	// once, through a cold open, then finishes the restore.
	time.Sleep(2500 * time.Millisecond)
	p = serve()
	if got := coldQuery(t, base, "SELECT id, v FROM t WHERE k = 'key-31337'"); got != want["byKey"] {
		t.Fatalf("point query after the restart: %s, want %s", got, want["byKey"])
	}
	// Its log line may reach us after the answer (a pipe).
	waitUntil(t, 10*time.Second, func() bool { return strings.Contains(p.out.String(), "cold open: first read answered") }, p)

	// SIGTERM in the middle of the restore: the server stops promptly,
	// cancelling it, and leaves nothing at the database's path.
	if strings.Contains(p.out.String(), "cold open: restored") {
		t.Fatal("the restore finished before the SIGTERM: the test proves nothing")
	}
	termAt := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM in the middle of a cold open's restore:\n%s", err, lastLines(p.out.String(), 20))
	}
	t.Logf("SIGTERM in the middle of the restore: exited in %s", time.Since(termAt).Round(time.Millisecond))
	if strings.Contains(p.out.String(), "cold open: restored") {
		t.Fatal("the restore finished before the SIGTERM took effect: the test proves nothing")
	}
	if left, _ := filepath.Glob(filepath.Join(data, "*.db*")); len(left) != 0 {
		t.Fatalf("files left at the database's path after SIGTERM: %v", left)
	}

	// Started again (the lease was released): answers, finishes the restore.
	p = serve()
	if got := coldQuery(t, base, "SELECT id, v FROM t WHERE k = 'key-31337'"); got != want["byKey"] {
		t.Fatalf("point query after the SIGTERM: %s, want %s", got, want["byKey"])
	}
	waitUntil(t, 3*time.Minute, func() bool { return strings.Contains(p.out.String(), "cold open: restored") }, p)
	if got := coldQuery(t, base, fmt.Sprintf("SELECT count(*) || ' ' || sum(id) FROM t WHERE id BETWEEN %d AND %d", id, id+99)); got != want["range"] {
		t.Fatalf("range query after the hand-over: %s, want %s", got, want["range"])
	}
	pages := samePages(t, plain, local)
	t.Logf("hydrated file has the plain restore's %d pages", pages)

	// Writes work as usual after the hand-over, and are durable.
	st, body, _ := ttRaw(t, "POST", base+"/v1/databases/big/query", "rwtoken1",
		`{"sql":"INSERT INTO t (id, k, v) VALUES (?, 'after', 'written')","params":[`+fmt.Sprint(rows+1)+`]}`)
	if st != 200 {
		t.Fatalf("write after the hand-over: %d %s", st, body)
	}
	if got := coldQuery(t, base, "SELECT count(*) FROM t"); got != fmt.Sprintf("[[%d]]", rows+1) {
		t.Fatalf("count after the write: %s, want %d", got, rows+1)
	}
	// The acknowledged write is in the bucket: a plain restore holds it.
	after := filepath.Join(dir, "after.db")
	mustSluice(t, m.Env(), "restore", "-q", "-o", after, m.URL(bucket, "big"))
	adb, err := sql.Open("sqlite", "file:"+after+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer adb.Close()
	var restored int
	var integrity string
	if err := adb.QueryRow("SELECT count(*) FROM t").Scan(&restored); err != nil {
		t.Fatal(err)
	}
	if err := adb.QueryRow("PRAGMA quick_check").Scan(&integrity); err != nil {
		t.Fatal(err)
	}
	if restored != rows+1 || integrity != "ok" {
		t.Fatalf("restored after the acknowledged write: %d rows (integrity %s), want %d", restored, integrity, rows+1)
	}
	t.Logf("acknowledged: %d rows seeded + 1 write after the hand-over; restored: %d rows", rows, restored)
}

// seedColdDB writes a database of rows rows (an indexed key, a value, a
// half-random pad) into the bucket under "big" with sluice replicate (a
// snapshot), then changes rows all over it (later files whose pages win).
func seedColdDB(t *testing.T, m *testenv.MinIOServer, bucket, src string, rows int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+src)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec1 := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec1("PRAGMA journal_mode=WAL")
	exec1("PRAGMA busy_timeout=10000")
	exec1("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v TEXT, pad BLOB)")
	exec1(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
		INSERT INTO t SELECT i, 'key-' || i, 'value ' || i, randomblob(1500) || zeroblob(1500) FROM n`, rows)
	exec1("PRAGMA wal_checkpoint(TRUNCATE)")
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "50ms", src, m.URL(bucket, "big"))
	waitForLTX(t, m, bucket, "big", side)
	for i := 0; i < 3; i++ {
		exec1("UPDATE t SET v = 'changed ' || id || ' in ' || ? WHERE id % 101 = ?", i, i)
		time.Sleep(100 * time.Millisecond)
	}
	exec1("UPDATE t SET v = 'changed last' WHERE id = 31337")
	time.Sleep(300 * time.Millisecond)
	stopSidecar(t, side)
}

// coldExpected reads the answers the test expects from a plain restore.
func coldExpected(t *testing.T, path string, id int) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var gotID int
	var k, v string
	if err := db.QueryRow("SELECT id, k, v FROM t WHERE id = ?", id).Scan(&gotID, &k, &v); err != nil {
		t.Fatal(err)
	}
	var n, sum int
	if err := db.QueryRow("SELECT count(*), sum(id) FROM (SELECT id FROM t WHERE id >= ? ORDER BY id LIMIT 100)", id).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	return map[string]string{
		"byKey":    js([][]any{{gotID, v}}),
		"byId":     js([][]any{{k, v}}),
		"range":    js([][]any{{fmt.Sprintf("%d %d", n, sum)}}),
		"js.byKey": js([][]any{{gotID, v}}),
		"js.byId":  js([][]any{{k, v}}),
		"js.range": js([]int{n, sum}),
	}
}

// coldQuery runs one statement through the JSON API and returns its rows as JSON.
func coldQuery(t *testing.T, base, q string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"sql": q})
	st, body, _ := ttRaw(t, "POST", base+"/v1/databases/big/query", "rwtoken1", string(b))
	if st != 200 {
		t.Fatalf("%s: %d %s", q, st, body)
	}
	var r struct {
		Results []struct {
			Rows json.RawMessage `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Results) == 0 {
		t.Fatalf("%s: answer %s: %v", q, body, err)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, r.Results[0].Rows)
	return compact.String()
}

// samePages fails unless both files hold the same pages; page 1 may differ
// in its change counter and the version that goes with it (bytes 24..27,
// 92..99), which SQLite rewrites when it opens a file for writing.
func samePages(t *testing.T, want, got string) int {
	t.Helper()
	a, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%s is %d bytes, the plain restore %d", got, len(b), len(a))
	}
	const ps = 4096
	for off := 0; off < len(a); off += ps {
		pa, pb := a[off:off+ps], b[off:off+ps]
		if off == 0 {
			pa, pb = bytes.Clone(pa), bytes.Clone(pb)
			for _, r := range [][2]int{{24, 28}, {92, 100}} {
				copy(pa[r[0]:r[1]], make([]byte, r[1]-r[0]))
				copy(pb[r[0]:r[1]], make([]byte, r[1]-r[0]))
			}
		}
		if !bytes.Equal(pa, pb) {
			t.Fatalf("page %d differs between the plain restore and the hydrated file", off/ps+1)
		}
	}
	return len(a) / ps
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// slowStore is a reverse proxy to MinIO that sends every response body at
// most bytesPerSec, as a distant bucket would: a page's range read stays
// quick, the whole file takes seconds.
type slowStore struct {
	URL         string
	gets, bytes atomic.Int64
}

func newSlowStore(t *testing.T, target string, bytesPerSec int64) *slowStore {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowStore{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet {
			s.gets.Add(1)
			r.Body = &slowBody{ReadCloser: r.Body, rate: bytesPerSec, start: time.Now(), count: &s.bytes}
		}
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

type slowBody struct {
	io.ReadCloser
	rate  int64
	start time.Time
	sent  int64
	count *atomic.Int64
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(p) > 32<<10 {
		p = p[:32<<10]
	}
	n, err := b.ReadCloser.Read(p)
	b.sent += int64(n)
	b.count.Add(int64(n))
	if due := b.start.Add(time.Duration(b.sent * int64(time.Second) / b.rate)); time.Until(due) > 0 {
		time.Sleep(time.Until(due))
	}
	return n, err
}

func coldMetrics(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "sluice_cold_open_") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
