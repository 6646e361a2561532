package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
)

// serveReal runs the server on a real listener (the connection cap and the
// deadlines live there, not in the handler) and returns its address.
func serveReal(t *testing.T, mod func(*Config)) (*Server, string) {
	t.Helper()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Compaction.Disabled = true
	cfg.Tokens = []TokenConfig{{Token: "limits-rw-token"}, {Token: "limits-ro-token", Access: "ro"},
		{Token: "limits-ro-one-token", Access: "ro", Databases: []string{"one"}}, {Token: "limits-other-rw"}}
	cfg.MetricsToken = "limits-metrics-token"
	if mod != nil {
		mod(&cfg)
	}
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

// Names a client is refused (403) or that do not exist (404) leave no
// series on /metrics and no per-name state in the host; the databases that
// do exist get series up to the configured count, the rest one "_other".
func TestRefusedNamesLeaveNoSeriesAndNoState(t *testing.T) {
	s, base := serveReal(t, func(c *Config) { c.Limits.MetricsDatabases = 2 })
	for i := range 2000 {
		r := do(t, "GET", fmt.Sprintf("%s/v1/databases/spam-%d", base, i), "limits-ro-one-token", "")
		expect(t, r, http.StatusForbidden)
		r = do(t, "GET", fmt.Sprintf("%s/v1/databases/missing-%d", base, i), "limits-rw-token", "")
		expect(t, r, http.StatusNotFound)
	}
	for _, db := range []string{"a1", "a2", "a3", "a4"} {
		expect(t, do(t, "PUT", base+"/v1/databases/"+db, "limits-rw-token", ""), http.StatusCreated)
		expect(t, query(t, base, db, "limits-rw-token", `{"sql":"SELECT 1"}`), http.StatusOK)
	}
	m := string(do(t, "GET", base+"/metrics", "limits-metrics-token", "").body)
	if strings.Contains(m, "spam-") || strings.Contains(m, "missing-") {
		t.Fatal("/metrics has series for names that do not exist")
	}
	if !strings.Contains(m, `db="_other"`) || strings.Count(m, `sluice_http_requests_total{route="POST /v1/databases/{name}/query",db="a`) != 2 {
		t.Fatalf("want two databases with their own request series and the rest under _other:\n%s", grepLines(m, "sluice_http_requests_total"))
	}
	if n := s.host.NameLocks(); n != 0 {
		t.Fatalf("%d per-name locks left after the requests ended", n)
	}
	if n := s.metrics.reg.Series(); n > 200 {
		t.Fatalf("%d series after 4,000 refused names", n)
	}
	t.Logf("4,000 refused or unknown names: %d series, %d per-name locks, /metrics %d bytes", s.metrics.reg.Series(), s.host.NameLocks(), len(m))
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A body that never ends: without credentials it is refused at once;
// with them, once the body read timeout passed, naming that limit.
func TestSlowBodiesAreCutOff(t *testing.T) {
	_, base := serveReal(t, func(c *Config) { c.Limits.BodyReadTimeout = Duration(time.Second) })
	addr := strings.TrimPrefix(base, "http://")
	slow := func(token string) (int, string, time.Duration) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		head := "POST /v1/databases/x/query HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		if token != "" {
			head += "Authorization: Bearer " + token + "\r\n"
		}
		start := time.Now()
		io.WriteString(c, head+"\r\n1\r\n{\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					if _, err := io.WriteString(c, "1\r\n \r\n"); err != nil {
						return
					}
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a slow body (token %q): %v", token, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	code, body, took := slow("")
	if code != http.StatusUnauthorized || took > 500*time.Millisecond {
		t.Errorf("unauthenticated slow body: %d after %s (want 401 at once): %s", code, took, body)
	}
	code, body, took = slow("limits-rw-token")
	if code != http.StatusRequestTimeout || !strings.Contains(body, "limits.body-read-timeout") || took > 5*time.Second {
		t.Errorf("authenticated slow body: %d after %s (want 408 naming limits.body-read-timeout after about 1s): %s", code, took, body)
	}
	t.Logf("slow body: 401 at once without a token, %d after %s with one", code, took.Round(time.Millisecond))
}

// One connection past the cap is told so and closed; a slot freed is
// taken again.
func TestConnectionCap(t *testing.T) {
	_, base := serveReal(t, func(c *Config) { c.Limits.MaxConnections = 2 })
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond) // accepted
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a connection past the cap got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "limits.max-connections") {
		t.Fatalf("past the cap: %d %s", resp.StatusCode, b)
	}
	held[0].Close()
	time.Sleep(100 * time.Millisecond)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	r, err := client.Get(base + "/health")
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("after a slot was freed: %v %v", r, err)
	}
	r.Body.Close()
	held[1].Close()
}

// An answer over max-response-bytes is refused naming the limit, on the
// JSON API (which stops building it) and on Hrana (the statement past it
// fails SQLITE_TOOBIG inside the pipeline, as clients parse statement
// errors); smaller ones pass.
func TestAnswerOverTheLimit(t *testing.T) {
	_, base := serveReal(t, func(c *Config) { c.Limits.MaxResponseBytes = 64 << 10 })
	expect(t, do(t, "PUT", base+"/v1/databases/big", "limits-rw-token", ""), http.StatusCreated)
	big := `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 5000) SELECT i, printf('%0100d', i) FROM n`
	r := query(t, base, "big", "limits-rw-token", `{"sql":"`+big+`"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "SQLITE_TOOBIG") || !strings.Contains(string(r.body), "limits.max-response-bytes") {
		t.Fatalf("JSON API: %d %.300s", r.status, r.body)
	}
	expect(t, query(t, base, "big", "limits-rw-token", `{"sql":"SELECT 1"}`), http.StatusOK)
	r = do(t, "POST", base+"/db/big/v3/pipeline", "limits-rw-token", `{"requests":[{"type":"execute","stmt":{"sql":"`+big+`"}},{"type":"close"}]}`)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"type":"error"`) || !strings.Contains(string(r.body), "SQLITE_TOOBIG") ||
		!strings.Contains(string(r.body), "limits.max-response-bytes") || len(r.body) > 64<<10 {
		t.Fatalf("Hrana: %d %.300s", r.status, r.body)
	}
}

// A read-only token creates nothing, not even the default database, on
// any route; a read-write one still does.
func TestReadOnlyTokenCreatesNoDatabase(t *testing.T) {
	s, base := serveReal(t, nil)
	pipe := `{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"close"}]}`
	for _, r := range []response{
		do(t, "POST", base+"/v3/pipeline", "limits-ro-token", pipe),
		do(t, "POST", base+"/v2/pipeline", "limits-ro-token", pipe),
		do(t, "GET", base+"/v1/databases/default", "limits-ro-token", ""),
		query(t, base, "default", "limits-ro-token", `{"sql":"SELECT 1"}`),
	} {
		if r.status != http.StatusNotFound || !strings.Contains(string(r.body), "read-only") {
			t.Errorf("read-only token on the missing default database: %d %s", r.status, r.body)
		}
	}
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, "default.db")); err == nil {
		t.Fatal("a read-only token created the default database")
	}
	expect(t, do(t, "POST", base+"/v3/pipeline", "limits-rw-token", pipe), http.StatusOK)
	expect(t, do(t, "POST", base+"/v3/pipeline", "limits-ro-token", pipe), http.StatusOK) // exists now
}

// /ready without credentials says ready or not, nothing of the replica.
func TestReadyWithoutCredentialsHidesTheReplica(t *testing.T) {
	_, base := serveReal(t, nil)
	r := do(t, "GET", base+"/ready", "", "")
	if strings.Contains(string(r.body), "replica") || strings.Contains(string(r.body), "file:") {
		t.Fatalf("unauthenticated /ready: %s", r.body)
	}
	r = do(t, "GET", base+"/ready", "limits-metrics-token", "")
	if !strings.Contains(string(r.body), `"replica"`) {
		t.Fatalf("/ready with the metrics token: %s", r.body)
	}
}

// A token creating databases in a loop stops at its limit; deleting one
// frees a slot; another token is not affected until the server's limit.
func TestDatabasesPerTokenAndPerServer(t *testing.T) {
	_, base := serveReal(t, func(c *Config) { c.Limits.MaxDatabasesPerToken = 3; c.Limits.MaxDatabases = 5 })
	for i := range 3 {
		expect(t, do(t, "PUT", fmt.Sprintf("%s/v1/databases/t%d", base, i), "limits-rw-token", ""), http.StatusCreated)
	}
	r := do(t, "PUT", base+"/v1/databases/t3", "limits-rw-token", "")
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "limits.max-databases-per-token") {
		t.Fatalf("fourth database of one token: %d %s", r.status, r.body)
	}
	expect(t, do(t, "DELETE", base+"/v1/databases/t0", "limits-rw-token", ""), http.StatusOK)
	expect(t, do(t, "PUT", base+"/v1/databases/t3", "limits-rw-token", ""), http.StatusCreated)
	expect(t, do(t, "PUT", base+"/v1/databases/o1", "limits-other-rw", ""), http.StatusCreated)
	expect(t, do(t, "PUT", base+"/v1/databases/o2", "limits-other-rw", ""), http.StatusCreated)
	r = do(t, "PUT", base+"/v1/databases/o3", "limits-other-rw", "")
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "limits.max-databases") {
		t.Fatalf("sixth database of the server: %d %s", r.status, r.body)
	}
}

// A keep-alive connection idle for longer than the write timeout still
// gets its next answer: the timeout counts only while an answer is written.
func TestWriteTimeoutSpansOneAnswer(t *testing.T) {
	_, base := serveReal(t, func(c *Config) { c.Limits.WriteTimeout = Duration(300 * time.Millisecond) })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	expect(t, do(t, "PUT", base+"/v1/databases/ka", "limits-rw-token", ""), http.StatusCreated)
	for i := range 3 {
		req, _ := http.NewRequest("POST", base+"/v1/databases/ka/query", strings.NewReader(`{"sql":"SELECT 1"}`))
		req.Header.Set("Authorization", "Bearer limits-rw-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d on a connection idle past the write timeout: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
		time.Sleep(600 * time.Millisecond)
	}
}
