package server

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
)

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func newTestServer(t *testing.T, mod func(*Config)) (*Server, *httptest.Server, replica.Store) {
	t.Helper()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Compaction.Disabled = true
	if mod != nil {
		mod(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewWithStore(cfg, store, logger, "test")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close(context.Background())
	})
	return s, ts, store
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("response is not JSON (%d): %q", r.status, r.body)
	}
	return m
}

func (r response) errorCode(t *testing.T) string {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %s", r.body)
	}
	return e["code"].(string)
}

func do(t *testing.T, method, url, token string, body string, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func query(t *testing.T, base, db, token, body string) response {
	t.Helper()
	return do(t, "POST", base+"/v1/databases/"+db+"/query", token, body)
}

func expect(t *testing.T, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

func TestJSONAPI(t *testing.T) {
	_, ts, store := newTestServer(t, func(c *Config) {
		c.Limits.MaxBodyBytes = 64 << 10
		c.Limits.StatementTimeout = Duration(300 * time.Millisecond)
	})
	base := ts.URL

	expect(t, do(t, "PUT", base+"/v1/databases/app", "", ""), 201)
	r := do(t, "PUT", base+"/v1/databases/app", "", "")
	expect(t, r, 409)
	if r.errorCode(t) != dberr.CodeExists {
		t.Fatalf("code %s", r.errorCode(t))
	}
	expect(t, do(t, "PUT", base+"/v1/databases/bad.name", "", ""), 400)

	expect(t, query(t, base, "app", "", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT, b BLOB)"}`), 200)
	blob := base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 250, 255})
	r = query(t, base, "app", "", `{"sql":"INSERT INTO t(i,f,s,b) VALUES (?,?,?,?)","params":[9007199254740993, 2.5, "héllo \"q\"", {"base64":"`+blob+`"}]}`)
	expect(t, r, 200)
	m := r.json(t)
	res := m["results"].([]any)[0].(map[string]any)
	meta := res["meta"].(map[string]any)
	if meta["changes"].(json.Number) != "1" || meta["last_row_id"].(json.Number) != "1" {
		t.Fatalf("meta = %v", meta)
	}
	if bm := r.header.Get("Sluice-Bookmark"); bm == "" || bm == "0" || m["bookmark"] != bm {
		t.Fatalf("bookmark header %q, body %v", bm, m["bookmark"])
	}
	r = query(t, base, "app", "", `{"sql":"INSERT INTO t(i,f,s) VALUES (:i, :f, :s)","params":{"i":-9223372036854775808,"f":1e300,"s":null}}`)
	expect(t, r, 200)
	// A lone BEGIN is refused as it is inside a batch, not run as a no-op on a
	// read connection (a ROLLBACK after it could not undo what followed).
	for _, q := range []string{"BEGIN", "BEGIN DEFERRED", "COMMIT", "END"} {
		r = query(t, base, "app", "", `{"sql":"`+q+`"}`)
		expect(t, r, 403)
		if !strings.Contains(string(r.body), "BEGIN/COMMIT/ROLLBACK are refused here") {
			t.Fatalf("%s: %s", q, r.body)
		}
	}
	// Ambiguous JSON is refused, not read as encoding/json would (last key wins,
	// any case matches): a proxy reading the first "sql" would see another statement.
	for body, want := range map[string]string{
		`{"sql":"SELECT 1","sql":"DELETE FROM t"}`:                    `key "sql" appears twice`,
		`{"SQL":"DELETE FROM t"}`:                                     `key "SQL": keys are lower case`,
		`{"batch":[{"sql":"SELECT 1","Params":[1]}]}`:                 `key "Params": keys are lower case`,
		`{"sql":"SELECT :a","params":{"a":1,"a":2}}`:                  `key "a" appears twice`,
		`{"batch":[{"sql":"SELECT 1"},{"sql":"SELECT 2","sql":"x"}]}`: `key "sql" appears twice`,
	} {
		r = query(t, base, "app", "", body)
		expect(t, r, 400)
		if !strings.Contains(strings.ReplaceAll(string(r.body), `\"`, `"`), want) {
			t.Fatalf("%s: %s, want %q", body, r.body, want)
		}
	}
	// A misspelled or missing name is an error, not a NULL written without a word.
	r = query(t, base, "app", "", `{"sql":"INSERT INTO t(i,f,s) VALUES (:i, :f, :s)","params":{"i":7,"f":1.5,"ss":"typo"}}`)
	expect(t, r, 400)
	if !strings.Contains(string(r.body), "value for parameter :s not found") {
		t.Fatalf("misspelled named parameter: %s", r.body)
	}

	r = query(t, base, "app", "", `{"sql":"SELECT i, f, s, b, typeof(i) FROM t ORDER BY id"}`)
	expect(t, r, 200)
	if !bytes.Contains(r.body, []byte(`[9007199254740993,2.5,"héllo \"q\"",{"base64":"`+blob+`"},"integer"]`)) {
		t.Fatalf("values not exact: %s", r.body)
	}
	if !bytes.Contains(r.body, []byte(`[-9223372036854775808,1e+300,null,null,"integer"]`)) {
		t.Fatalf("named-args row not exact: %s", r.body)
	}
	if !bytes.Contains(r.body, []byte(`"columns":["i","f","s","b","typeof(i)"]`)) {
		t.Fatalf("columns: %s", r.body)
	}

	// A batch is one transaction: a failing statement applies nothing.
	r = query(t, base, "app", "", `{"batch":[{"sql":"INSERT INTO t(i) VALUES (100)"},{"sql":"INSERT INTO t(id) VALUES (1)"}]}`)
	expect(t, r, 409)
	if !strings.HasPrefix(r.errorCode(t), "SQLITE_CONSTRAINT") {
		t.Fatalf("code %s", r.errorCode(t))
	}
	r = query(t, base, "app", "", `{"sql":"SELECT count(*) FROM t WHERE i = 100"}`)
	if !bytes.Contains(r.body, []byte(`"rows":[[0]]`)) {
		t.Fatalf("failed batch left rows: %s", r.body)
	}
	r = query(t, base, "app", "", `{"batch":[{"sql":"INSERT INTO t(i) VALUES (?)","params":[100]},{"sql":"SELECT count(*) FROM t WHERE i = 100"}]}`)
	expect(t, r, 200)
	if !bytes.Contains(r.body, []byte(`"rows":[[1]]`)) {
		t.Fatalf("batch results: %s", r.body)
	}

	// Bad input harms nothing.
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"sql": `, 400, "BAD_REQUEST"},
		{`{"sql":"SELECT 1","bogus":1}`, 400, "BAD_REQUEST"},
		{`{"sql":"SELECT 1","params":[[1]]}`, 400, "BAD_REQUEST"},
		{`{"sql":"SELECT 1","params":[99999999999999999999]}`, 400, "BAD_REQUEST"},
		{`{"sql":"SELEKT 1"}`, 400, "SQLITE_ERROR"},
		{`{"sql":"ATTACH DATABASE '/tmp/x.db' AS x"}`, 403, "FORBIDDEN"},
		{`{"sql":"VACUUM INTO '/tmp/x.db'"}`, 403, "FORBIDDEN"},
		{`{"sql":"SELECT load_extension('x')"}`, 403, "FORBIDDEN"},
		{`{"sql":"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r"}`, 408, "TIMEOUT"},
		{`{"sql":"SELECT * FROM nope"}`, 400, "SQLITE_ERROR"},
		{`{"sql":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "TOO_LARGE"},
	} {
		r := query(t, base, "app", "", c.body)
		if r.status != c.status || r.errorCode(t) != c.code {
			t.Errorf("%.60s: got %d %s, want %d %s", c.body, r.status, r.body, c.status, c.code)
		}
	}
	r = do(t, "GET", base+"/nope", "", "")
	expect(t, r, 404)
	if r.errorCode(t) != "NOT_FOUND" {
		t.Fatal(string(r.body))
	}
	expect(t, query(t, base, "ghost", "", `{"sql":"SELECT 1"}`), 404)

	// The server still serves, and the bucket has every acknowledged write.
	expect(t, query(t, base, "app", "", `{"sql":"SELECT 1"}`), 200)
	out := filepath.Join(t.TempDir(), "r.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "app"), out, restore.Options{}); err != nil {
		t.Fatal(err)
	}
	c, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Prep("SELECT count(*) FROM t")
	st.Step()
	if n := st.ColumnInt(0); n != 3 {
		t.Fatalf("bucket has %d rows, want 3", n)
	}
	st.Reset()
	c.Close()

	r = do(t, "GET", base+"/v1/databases", "", "")
	expect(t, r, 200)
	if !bytes.Contains(r.body, []byte(`"name":"app"`)) {
		t.Fatal(string(r.body))
	}
	expect(t, do(t, "DELETE", base+"/v1/databases/app", "", ""), 200)
	expect(t, query(t, base, "app", "", `{"sql":"SELECT count(*) FROM t"}`), 200) // restored: replica kept
	expect(t, do(t, "DELETE", base+"/v1/databases/app?purge=true", "", ""), 200)
	expect(t, query(t, base, "app", "", `{"sql":"SELECT 1"}`), 404)
	// The default database exists on first use.
	expect(t, query(t, base, "default", "", `{"sql":"SELECT 1"}`), 200)
	expect(t, do(t, "GET", base+"/health", "", ""), 200)
	if r := do(t, "GET", base+"/version", "", ""); !bytes.Contains(r.body, []byte(`"test"`)) {
		t.Fatal(string(r.body))
	}
}

func TestConcurrentWritersOverHTTP(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, query(t, ts.URL, "default", "", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)"}`), 200)
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for w := 0; w < 50; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				r := query(t, ts.URL, "default", "", `{"sql":"INSERT INTO t (json) VALUES ('{\"age\":10, \"name\":\"yamada\", \"class\":\"A\"}')"}`)
				if r.status != 200 {
					errs <- string(r.body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	r := query(t, ts.URL, "default", "", `{"sql":"SELECT count(*) FROM t"}`)
	if !bytes.Contains(r.body, []byte(`"rows":[[200]]`)) {
		t.Fatal(string(r.body))
	}
	m := do(t, "GET", ts.URL+"/metrics", "", "")
	for _, want := range []string{
		`sluice_http_requests_total{route="POST /v1/databases/{name}/query",db="default",code="200"} 202`,
		`sluice_write_group_requests_count{db="default"}`,
		`sluice_upload_duration_seconds_bucket{db="default",le="+Inf"}`,
		`sluice_objects_written_total{db="default"}`,
		`sluice_unshipped_commits{db="default"} 0`,
		`sluice_replication_txid{db="default"}`,
	} {
		if !bytes.Contains(m.body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Log(string(m.body))
	}
}

func TestAuth(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{
			{Token: "rw-token-123", Access: "rw"},
			{Token: "ro-token-123", Access: "ro"},
			{Token: "only-a-token", Access: "rw", Databases: []string{"a"}},
		}
		c.JWTPublicKey = base64.RawURLEncoding.EncodeToString(pub)
	})
	jwtFor := func(claims jwt.MapClaims) string {
		if _, ok := claims["exp"]; !ok {
			claims["exp"] = time.Now().Add(time.Hour).Unix()
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := ts.URL
	expect(t, query(t, base, "a", "", `{"sql":"SELECT 1"}`), 401)
	expect(t, query(t, base, "a", "wrong-token-1", `{"sql":"SELECT 1"}`), 401)
	expect(t, do(t, "GET", base+"/health", "", ""), 200) // probes need no token
	expect(t, do(t, "PUT", base+"/v1/databases/a", "rw-token-123", ""), 201)
	expect(t, do(t, "PUT", base+"/v1/databases/b", "only-a-token", ""), 403)
	expect(t, query(t, base, "a", "only-a-token", `{"sql":"CREATE TABLE t(x)"}`), 200)
	expect(t, query(t, base, "a", "ro-token-123", `{"sql":"SELECT count(*) FROM t"}`), 200)
	expect(t, query(t, base, "a", "ro-token-123", `{"sql":"INSERT INTO t VALUES (1)"}`), 403)
	expect(t, query(t, base, "a", "ro-token-123", `{"sql":"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x"}`), 403)
	expect(t, do(t, "DELETE", base+"/v1/databases/a", "ro-token-123", ""), 403)
	r := do(t, "GET", base+"/v1/databases", "only-a-token", "")
	expect(t, r, 200)

	// sqld-style JWTs.
	expect(t, query(t, base, "a", jwtFor(jwt.MapClaims{"a": "rw", "id": "a"}), `{"sql":"INSERT INTO t VALUES (2)"}`), 200)
	expect(t, query(t, base, "a", jwtFor(jwt.MapClaims{"a": "ro"}), `{"sql":"INSERT INTO t VALUES (3)"}`), 403)
	expect(t, query(t, base, "a", jwtFor(jwt.MapClaims{"a": "ro"}), `{"sql":"SELECT 1"}`), 200)
	expect(t, query(t, base, "a", jwtFor(jwt.MapClaims{"id": "other"}), `{"sql":"SELECT 1"}`), 403)
	expect(t, query(t, base, "a", jwtFor(jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}), `{"sql":"SELECT 1"}`), 401)
	// A JWT that never expires, or lives longer than the server allows, is refused.
	noExp, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"a": "rw"}).SignedString(priv)
	if r := query(t, base, "a", noExp, `{"sql":"SELECT 1"}`); r.status != 401 || !bytes.Contains(r.body, []byte("no exp claim")) {
		t.Fatalf("JWT without exp: %d %s", r.status, r.body)
	}
	long := jwtFor(jwt.MapClaims{"iat": time.Now().Unix(), "exp": time.Now().Add(8 * 24 * time.Hour).Unix()})
	if r := query(t, base, "a", long, `{"sql":"SELECT 1"}`); r.status != 401 || !bytes.Contains(r.body, []byte("maximum")) {
		t.Fatalf("JWT beyond the maximum lifetime: %d %s", r.status, r.body)
	}
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"a": "rw"}).SignedString(otherKey)
	expect(t, query(t, base, "a", forged, `{"sql":"SELECT 1"}`), 401)

	// Hrana is behind the same middleware.
	pipeline := `{"requests":[{"type":"execute","stmt":{"sql":"INSERT INTO t VALUES (9)"}},{"type":"close"}]}`
	expect(t, do(t, "POST", base+"/v2/pipeline", "", pipeline, "x-namespace", "a"), 401)
	r = do(t, "POST", base+"/db/a/v2/pipeline", "ro-token-123", pipeline)
	if r.status == 200 && !bytes.Contains(r.body, []byte(`"error"`)) {
		t.Fatalf("read-only token wrote through Hrana: %s", r.body)
	}
	r = do(t, "POST", base+"/db/a/v2/pipeline", "rw-token-123", pipeline)
	expect(t, r, 200)
	if bytes.Contains(r.body, []byte(`"type":"error"`)) || r.header.Get("Sluice-Bookmark") == "" {
		t.Fatalf("hrana write: %s (bookmark %q)", r.body, r.header.Get("Sluice-Bookmark"))
	}
	r = do(t, "POST", base+"/v2/pipeline", "rw-token-123", `{"requests":[{"type":"execute","stmt":{"sql":"SELECT count(*) FROM t"}}]}`, "x-namespace", "a")
	expect(t, r, 200)
	if !bytes.Contains(r.body, []byte(`"value":"2"`)) {
		t.Fatalf("x-namespace selection: %s", r.body)
	}
	expect(t, do(t, "POST", base+"/db/b/v2/pipeline", "only-a-token", pipeline), 403)
}

func TestRefusesRemoteListenWithoutAuth(t *testing.T) {
	store, _ := file.New(t.TempDir())
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "0.0.0.0:8080"
	quiet := slog.New(slog.DiscardHandler)
	if _, err := NewWithStore(cfg, store, quiet, "test"); err == nil || !strings.Contains(err.Error(), "-allow-unauthenticated-remote") {
		t.Fatalf("got %v, want a refusal naming the flag", err)
	}
	cfg.AllowUnauthenticatedRemote = true
	s, err := NewWithStore(cfg, store, quiet, "test")
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	for addr, loop := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, ":8080": false, "10.0.0.1:1": false} {
		if IsLoopback(addr) != loop {
			t.Errorf("IsLoopback(%s) = %v", addr, !loop)
		}
	}
}

func TestGracefulShutdownShipsEverything(t *testing.T) {
	store, _ := file.New(t.TempDir())
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Compaction.Disabled = true
	logger := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewWithStore(cfg, store, logger, "test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	expect(t, query(t, base, "default", "", `{"sql":"CREATE TABLE t(x)"}`), 200)
	var acked sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		acked.Add(1)
		go func() {
			defer acked.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Post(base+"/v1/databases/default/query", "application/json", strings.NewReader(`{"sql":"INSERT INTO t VALUES (1)"}`))
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after shutdown: %v", err)
	}
	close(stop)
	acked.Wait()
	out := filepath.Join(t.TempDir(), "r.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "default"), out, restore.Options{}); err != nil {
		t.Fatal(err)
	}
	c, _ := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	defer c.Close()
	st := c.Prep("SELECT count(*) FROM t")
	st.Step()
	got := st.ColumnInt(0)
	st.Reset()
	if ok == 0 || got < ok {
		t.Fatalf("bucket has %d rows, %d writes were acknowledged", got, ok)
	}
}

// serve bounds SQLite's memory across every database as configured
// (SQLite's soft heap limit; a negative argument reads it back).
func TestServeSetsSQLiteMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		set  units.Size
		want int64
	}{{0, DefaultSQLiteMemory}, {48 << 20, 48 << 20}, {-1, 0}} {
		store, _ := file.New(t.TempDir())
		cfg := Defaults()
		cfg.DataDir = t.TempDir()
		cfg.Compaction.Disabled = true
		cfg.Limits.SQLiteMemory = tc.set
		s, err := NewWithStore(cfg, store, slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), "test")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln) }()
		expect(t, query(t, "http://"+ln.Addr().String(), "default", "", `{"sql":"SELECT 1"}`), 200)
		got := sqliteconn.SetSoftHeapLimit(-1)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("sqlite-memory %d: SQLite's soft heap limit is %d, want %d", tc.set, got, tc.want)
		}
	}
	sqliteconn.SetSoftHeapLimit(0)
}
