package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests of what one client can do to another through Hrana streams: batons
// bound to the token that opened them, quotas, the request time limit and
// what /metrics reveals. All go through the real server over HTTP.

type hranaAnswer struct {
	status  int
	Baton   *string `json:"baton"`
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Results []struct {
		Type  string `json:"type"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

// pipeline posts a v3 pipeline of SQL statements (and "close" as the
// literal request type) on db with token, continuing baton (nil: new stream).
func pipeline(t *testing.T, base, db, token string, baton *string, stmts ...string) hranaAnswer {
	t.Helper()
	var reqs []any
	for _, q := range stmts {
		if q == "close" {
			reqs = append(reqs, map[string]any{"type": "close"})
			continue
		}
		reqs = append(reqs, map[string]any{"type": "execute", "stmt": map[string]any{"sql": q}})
	}
	body, _ := json.Marshal(map[string]any{"baton": baton, "requests": reqs})
	r := do(t, "POST", base+"/db/"+db+"/v3/pipeline", token, string(body))
	var a hranaAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("pipeline answer %d is not JSON: %s", r.status, r.body)
	}
	a.status = r.status
	return a
}

func (a hranaAnswer) mustOK(t *testing.T, what string) {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("%s: status %d %s: %s", what, a.status, a.Code, a.Message)
	}
	for i, r := range a.Results {
		if r.Type != "ok" {
			t.Fatalf("%s: result %d: %s %+v", what, i, r.Type, r.Error)
		}
	}
}

func countRows(t *testing.T, base, db, token, table string) string {
	t.Helper()
	r := query(t, base, db, token, `{"sql":"SELECT count(*) FROM `+table+`"}`)
	expect(t, r, 200)
	var out struct {
		Results []struct {
			Rows [][]any `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Results) != 1 || len(out.Results[0].Rows) != 1 {
		t.Fatalf("count: %s", r.body)
	}
	return fmt.Sprint(out.Results[0].Rows[0][0])
}

func TestReadOnlyTokenCannotContinueAReadWriteStream(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "rw-token-123"}, {Token: "ro-token-123", Access: "ro"}, {Token: "rw-token-456"}}
	})
	base := ts.URL
	expect(t, do(t, "PUT", base+"/v1/databases/a", "rw-token-123", ""), 201)
	pipeline(t, base, "a", "rw-token-123", nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")

	open := pipeline(t, base, "a", "rw-token-123", nil, "BEGIN", "INSERT INTO t VALUES (1)")
	open.mustOK(t, "BEGIN, INSERT")
	if open.Baton == nil {
		t.Fatal("no baton for an open transaction")
	}
	// Another token, read-only or even read-write, cannot continue it.
	for _, other := range []string{"ro-token-123", "rw-token-456"} {
		a := pipeline(t, base, "a", other, open.Baton, "INSERT INTO t VALUES (2)", "COMMIT")
		if a.status != http.StatusForbidden || a.Code != "BATON_FORBIDDEN" || !strings.Contains(a.Message, "another token") {
			t.Fatalf("%s continued a stream it did not open: %d %s %s", other, a.status, a.Code, a.Message)
		}
	}
	// The owner's stream is untouched: its baton still works and commits only its row.
	pipeline(t, base, "a", "rw-token-123", open.Baton, "COMMIT", "close").mustOK(t, "owner's COMMIT")
	if n := countRows(t, base, "a", "rw-token-123", "t"); n != "1" {
		t.Fatalf("rows after the owner's commit: %s, want 1", n)
	}
}

func TestStreamFloodFromOneTokenDoesNotAffectAnother(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{
			{Token: "flooder-123", Access: "ro", Databases: []string{"a"}},
			{Token: "victim-1234", Databases: []string{"b"}},
			{Token: "admin-12345"},
		}
		// The flooder's streams must stay open for the whole test, however
		// slowly it runs (-race on a busy machine).
		c.Hrana.IdleTimeout = Duration(time.Hour)
	})
	base := ts.URL
	for _, db := range []string{"a", "b"} {
		expect(t, do(t, "PUT", base+"/v1/databases/"+db, "admin-12345", ""), 201)
	}
	pipeline(t, base, "b", "victim-1234", nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")

	// 10,000 streams that the flooder never closes.
	const streams, workers = 10000, 8
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	body := `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}}]}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < streams/workers; i++ {
				req, _ := http.NewRequest("POST", base+"/db/a/v3/pipeline", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer flooder-123")
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					codes[err.Error()]++
					mu.Unlock()
					continue
				}
				var a hranaAnswer
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				key := fmt.Sprint(resp.StatusCode, " ", a.Code)
				if resp.StatusCode == 200 && a.Baton == nil {
					key = "200 without a baton"
				}
				mu.Lock()
				codes[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// The flooder gets its quota, then loud refusals; never a silent null baton.
	if codes["200 "] != 1000 || codes["429 STREAM_LIMIT"] != streams-1000 || len(codes) != 2 {
		t.Fatalf("flooder's answers: %v", codes)
	}
	// Meanwhile the victim's interactive transaction works and is durable.
	open := pipeline(t, base, "b", "victim-1234", nil, "BEGIN", "INSERT INTO t VALUES (42)")
	open.mustOK(t, "victim BEGIN, INSERT")
	if open.Baton == nil {
		t.Fatal("the victim's open transaction got a null baton")
	}
	pipeline(t, base, "b", "victim-1234", open.Baton, "COMMIT", "close").mustOK(t, "victim COMMIT")
	if n := countRows(t, base, "b", "victim-1234", "t"); n != "1" {
		t.Fatalf("victim's rows: %s, want 1", n)
	}
	// One-shot requests (ending with close) keep working for the flooder too.
	pipeline(t, base, "a", "flooder-123", nil, "SELECT 1", "close").mustOK(t, "one-shot at quota")
}

// When the server's whole stream table is full, a transaction that cannot
// keep its stream is refused before it runs, instead of being answered ok
// with a null baton and rolled back.
func TestFullStreamTableRefusesLoudly(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Hrana.MaxStreams = 5
	})
	base := ts.URL
	expect(t, do(t, "PUT", base+"/v1/databases/a", "", ""), 201)
	pipeline(t, base, "a", "", nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")
	for i := 0; i < 5; i++ {
		pipeline(t, base, "a", "", nil, "SELECT 1").mustOK(t, "fill")
	}
	a := pipeline(t, base, "a", "", nil, "BEGIN", "INSERT INTO t VALUES (1)")
	if a.status != http.StatusTooManyRequests || a.Code != "STREAM_LIMIT" || !strings.Contains(a.Message, "open streams") {
		t.Fatalf("BEGIN, INSERT on a full stream table: %d %s %s (baton %v)", a.status, a.Code, a.Message, a.Baton)
	}
	if n := countRows(t, base, "a", "", "t"); n != "0" {
		t.Fatalf("rows: %s", n)
	}
}

func TestReadOnlySessionsDoNotLockOutWriters(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "reader-1234", Access: "ro"}, {Token: "writer-1234"}}
		c.Hrana.MaxSessionsPerToken = 100
		c.Hrana.TxTimeout = Duration(time.Minute)
		c.Hrana.IdleTimeout = Duration(time.Minute)
	})
	base := ts.URL
	expect(t, do(t, "PUT", base+"/v1/databases/a", "writer-1234", ""), 201)
	pipeline(t, base, "a", "writer-1234", nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")
	opened, refused := 0, 0
	for i := 0; i < 70; i++ {
		a := pipeline(t, base, "a", "reader-1234", nil, "BEGIN", "SELECT count(*) FROM t")
		switch {
		case a.status == 200 && a.Results[0].Type == "ok" && a.Baton != nil:
			opened++
		case a.status == 200 && a.Results[0].Error != nil && strings.Contains(a.Results[0].Error.Message, "read-only interactive transactions"):
			refused++
		default:
			t.Fatalf("reader %d: %+v", i, a)
		}
	}
	if opened != 64 || refused != 6 {
		t.Fatalf("read-only sessions: %d opened, %d refused; want 64 and 6", opened, refused)
	}
	open := pipeline(t, base, "a", "writer-1234", nil, "BEGIN", "INSERT INTO t VALUES (1)")
	open.mustOK(t, "writer BEGIN with 64 readers in transactions")
	pipeline(t, base, "a", "writer-1234", open.Baton, "COMMIT", "close").mustOK(t, "writer COMMIT")
	if n := countRows(t, base, "a", "writer-1234", "t"); n != "1" {
		t.Fatalf("rows: %s", n)
	}
}

func TestLongBatchIsCutAtTheRequestTimeout(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Limits.RequestTimeout = Duration(2 * time.Second)
	})
	base := ts.URL
	expect(t, do(t, "PUT", base+"/v1/databases/a", "", ""), 201)
	pipeline(t, base, "a", "", nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")
	// Each step is well under the statement limit (tens of milliseconds);
	// together they would take far longer than the request limit.
	step := `{"stmt":{"sql":"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 50000) INSERT INTO t SELECT x FROM c"}}`
	steps := strings.TrimSuffix(strings.Repeat(step+",", 1000), ",")
	r := do(t, "POST", base+"/db/a/v3/pipeline", "", `{"baton":null,"requests":[{"type":"batch","batch":{"steps":[`+steps+`]}},{"type":"close"}]}`)
	expect(t, r, 200)
	var a hranaAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Results) != 2 || a.Results[0].Error == nil || a.Results[0].Error.Code != "REQUEST_TIMEOUT" || !strings.Contains(a.Results[0].Error.Message, "request timeout") {
		t.Fatalf("long batch: %s", bytes.TrimSpace(r.body)[:min(len(r.body), 600)])
	}
	// Nothing of it stayed, and the writer is free for the next request.
	if n := countRows(t, base, "a", "", "t"); n != "0" {
		t.Fatalf("rows after the cut batch: %s, want 0", n)
	}
	pipeline(t, base, "a", "", nil, "INSERT INTO t VALUES (1)", "close").mustOK(t, "write after the cut batch")
	if n := countRows(t, base, "a", "", "t"); n != "1" {
		t.Fatalf("rows: %s, want 1", n)
	}
}

func TestMetricsNeedATokenAndHideOtherDatabases(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "admin-12345"}, {Token: "only-a-1234", Access: "ro", Databases: []string{"a"}}}
		c.MetricsToken = "scraper-12345"
	})
	base := ts.URL
	for _, db := range []string{"a", "secret-b"} {
		expect(t, do(t, "PUT", base+"/v1/databases/"+db, "admin-12345", ""), 201)
		expect(t, query(t, base, db, "admin-12345", `{"sql":"CREATE TABLE t (x)"}`), 200)
	}
	expect(t, do(t, "GET", base+"/metrics", "", ""), 401)
	expect(t, do(t, "GET", base+"/metrics", "wrong-token-1", ""), 401)
	// The metrics token reads /metrics and nothing else.
	expect(t, query(t, base, "a", "scraper-12345", `{"sql":"SELECT 1"}`), 401)
	for _, c := range []struct {
		token      string
		seesSecret bool
	}{{"scraper-12345", true}, {"admin-12345", true}, {"only-a-1234", false}} {
		r := do(t, "GET", base+"/metrics", c.token, "")
		expect(t, r, 200)
		if !bytes.Contains(r.body, []byte(`sluice_replication_txid{db="a"}`)) {
			t.Fatalf("%s: metrics lack database a:\n%s", c.token, r.body)
		}
		if got := bytes.Contains(r.body, []byte("secret-b")); got != c.seesSecret {
			t.Fatalf("%s: metrics show secret-b: %v, want %v", c.token, got, c.seesSecret)
		}
	}
}

func TestSessionQuotaPerToken(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "greedy-1234", Access: "ro"}, {Token: "other-12345"}}
		c.Hrana.MaxSessionsPerToken = 2
	})
	base := ts.URL
	expect(t, do(t, "PUT", base+"/v1/databases/a", "other-12345", ""), 201)
	pipeline(t, base, "a", "other-12345", nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")
	for i := 0; i < 2; i++ {
		pipeline(t, base, "a", "greedy-1234", nil, "BEGIN", "SELECT 1").mustOK(t, "greedy BEGIN")
	}
	a := pipeline(t, base, "a", "greedy-1234", nil, "BEGIN", "SELECT 1")
	if a.status != 200 || a.Results[0].Error == nil || a.Results[0].Error.Code != "SESSION_LIMIT" {
		t.Fatalf("third transaction of a token limited to 2: %+v", a)
	}
	open := pipeline(t, base, "a", "other-12345", nil, "BEGIN", "INSERT INTO t VALUES (1)")
	open.mustOK(t, "another token's BEGIN")
	pipeline(t, base, "a", "other-12345", open.Baton, "COMMIT", "close").mustOK(t, "COMMIT")
}

// The JSON API's batches have the same limit: statements each well under the
// statement limit cannot together hold the writer past the request limit.
func TestLongJSONBatchIsCutAtTheRequestTimeout(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Limits.RequestTimeout = Duration(2 * time.Second)
	})
	base := ts.URL
	expect(t, do(t, "PUT", base+"/v1/databases/a", "", ""), 201)
	expect(t, query(t, base, "a", "", `{"sql":"CREATE TABLE t (x)"}`), 200)
	step := `{"sql":"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 50000) INSERT INTO t SELECT x FROM c"}`
	r := query(t, base, "a", "", `{"batch":[`+strings.TrimSuffix(strings.Repeat(step+",", 1000), ",")+`]}`)
	expect(t, r, 408)
	if !bytes.Contains(r.body, []byte(`"TIMEOUT"`)) || !bytes.Contains(r.body, []byte("request_timeout")) {
		t.Fatalf("long JSON batch: %s", bytes.TrimSpace(r.body)[:min(len(r.body), 600)])
	}
	if n := countRows(t, base, "a", "", "t"); n != "0" {
		t.Fatalf("rows after the cut batch: %s, want 0", n)
	}
	expect(t, query(t, base, "a", "", `{"sql":"INSERT INTO t VALUES (1)"}`), 200)
	if n := countRows(t, base, "a", "", "t"); n != "1" {
		t.Fatalf("rows: %s, want 1", n)
	}
}

// A stream that idled out holding nothing is continued by its last baton
// (clients that keep one stream per connection cannot recover from
// STREAM_EXPIRED); one that held a connection setting, a TEMP table or a
// transaction is not, and nothing of its transaction is applied.
func TestOnlyStreamsThatHeldNothingContinueAfterIdling(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "idler-12345"}}
		c.Hrana.IdleTimeout = Duration(300 * time.Millisecond)
	})
	base, tok := ts.URL, "idler-12345"
	expect(t, do(t, "PUT", base+"/v1/databases/d", tok, ""), 201)
	pipeline(t, base, "d", tok, nil, "CREATE TABLE t (x)", "close").mustOK(t, "create")

	plain := pipeline(t, base, "d", tok, nil, "INSERT INTO t VALUES ('plain')")
	plain.mustOK(t, "plain")
	held := map[string]hranaAnswer{
		"a connection setting": pipeline(t, base, "d", tok, nil, "PRAGMA foreign_keys = OFF"),
		"a TEMP table":         pipeline(t, base, "d", tok, nil, "CREATE TEMP TABLE scratch (y)"),
		"a transaction":        pipeline(t, base, "d", tok, nil, "BEGIN", "INSERT INTO t VALUES ('in a transaction')"),
	}
	for what, a := range held {
		a.mustOK(t, what)
	}
	time.Sleep(1200 * time.Millisecond) // well past the idle timeout: every stream reaped

	again := pipeline(t, base, "d", tok, plain.Baton, "INSERT INTO t VALUES ('after idling')")
	again.mustOK(t, "the stream that held nothing, after idling out")
	for what, a := range held {
		if late := pipeline(t, base, "d", tok, a.Baton, "INSERT INTO t VALUES ('late')", "COMMIT"); late.status != 400 || late.Code != "STREAM_EXPIRED" {
			t.Fatalf("a stream that held %s, after idling out: %d %s %s", what, late.status, late.Code, late.Message)
		}
	}
	if got := string(do(t, "POST", base+"/v1/databases/d/query", tok, `{"sql":"SELECT group_concat(x, '|') FROM t"}`).body); !strings.Contains(got, `"plain|after idling"`) {
		t.Fatalf("rows after the idle streams: %s", got)
	}
}

// A stream continued after idling out takes a slot of its token's stream
// quota again; refused for a full quota, it can be continued once a slot
// is free.
func TestAContinuedStreamCountsAgainstItsTokensQuota(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "idler-12345"}}
		c.Hrana.IdleTimeout = Duration(time.Second) // the two streams opened below stay open
		c.Hrana.MaxStreamsPerToken = 2
	})
	base, tok := ts.URL, "idler-12345"
	expect(t, do(t, "PUT", base+"/v1/databases/d", tok, ""), 201)
	idle := pipeline(t, base, "d", tok, nil, "SELECT 1")
	idle.mustOK(t, "open")
	time.Sleep(2500 * time.Millisecond) // reaped, remembered
	a := pipeline(t, base, "d", tok, nil, "SELECT 1")
	b := pipeline(t, base, "d", tok, nil, "SELECT 1")
	a.mustOK(t, "first of two")
	b.mustOK(t, "second of two")
	if r := pipeline(t, base, "d", tok, idle.Baton, "SELECT 2"); r.status == 200 || r.Code != "STREAM_LIMIT" {
		t.Fatalf("continuing a stream past the token's quota: %d %s %s", r.status, r.Code, r.Message)
	}
	pipeline(t, base, "d", tok, a.Baton, "close").mustOK(t, "close one")
	pipeline(t, base, "d", tok, idle.Baton, "SELECT 2").mustOK(t, "continued once a slot is free")
}
