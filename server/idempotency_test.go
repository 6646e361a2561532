package server

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
)

func count(t *testing.T, base, where string) string {
	t.Helper()
	r := query(t, base, "default", "", `{"sql":"SELECT count(*) FROM t`+where+`"}`)
	expect(t, r, 200)
	rows := r.json(t)["results"].([]any)[0].(map[string]any)["rows"].([]any)
	return string(rows[0].([]any)[0].(interface{ String() string }).String())
}

func keyed(t *testing.T, base, key, body string) response {
	t.Helper()
	return do(t, "POST", base+"/v1/databases/default/query", "", body, "Idempotency-Key", key)
}

// A write retried with the same Idempotency-Key returns the first answer and
// does not run again; the same key with another body is refused; reads
// ignore the key; the key table does not disturb the user's own schema.
func TestIdempotencyKeyReplaysFirstAnswer(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, query(t, ts.URL, "default", "", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)"}`), 200)

	insert := `{"sql":"INSERT INTO t(v) VALUES ('a') RETURNING id, v"}`
	first := keyed(t, ts.URL, "order-1", insert)
	expect(t, first, 200)
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first run marked as replayed")
	}
	again := keyed(t, ts.URL, "order-1", insert)
	expect(t, again, 200)
	if again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry not marked as replayed: %v", again.header)
	}
	// The answer is the first one (same rows and last_row_id), bookmark aside.
	strip := func(b []byte) string { return string(b[:bytes.Index(b, []byte(`"bookmark"`))]) }
	if strip(again.body) != strip(first.body) {
		t.Fatalf("replayed answer differs:\nfirst %s\nretry %s", first.body, again.body)
	}
	if n := count(t, ts.URL, ""); n != "1" {
		t.Fatalf("rows after a retried write = %s, want 1", n)
	}

	other := keyed(t, ts.URL, "order-1", `{"sql":"INSERT INTO t(v) VALUES ('b')"}`)
	expect(t, other, 422)
	if c := other.errorCode(t); c != dberr.CodeKeyReused {
		t.Fatalf("code %s, want %s", c, dberr.CodeKeyReused)
	}

	// A failed write stores nothing: fixing nothing and retrying runs it again.
	bad := `{"sql":"INSERT INTO t(id, v) VALUES (1, 'dup')"}`
	expect(t, keyed(t, ts.URL, "order-2", bad), 409)
	expect(t, keyed(t, ts.URL, "order-2", bad), 409)

	// Reads ignore the key (and never create the key's row).
	read := `{"sql":"SELECT count(*) FROM t"}`
	r1 := keyed(t, ts.URL, "read-1", read)
	expect(t, r1, 200)
	if r1.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a read was replayed")
	}

	// The durability check of a bookmark.
	bm := first.header.Get("Sluice-Bookmark")
	chk := do(t, "GET", ts.URL+"/v1/databases/default/bookmark/"+bm, "", "")
	expect(t, chk, 200)
	if chk.json(t)["durable"] != true {
		t.Fatalf("bookmark %s of an acknowledged write not durable: %s", bm, chk.body)
	}
	chk = do(t, "GET", ts.URL+"/v1/databases/default/bookmark/1000000", "", "")
	expect(t, chk, 200)
	if chk.json(t)["durable"] != false {
		t.Fatalf("a future bookmark reported durable: %s", chk.body)
	}
	expect(t, do(t, "GET", ts.URL+"/v1/databases/default/bookmark/x", "", ""), 400)

	// Bad keys are clear errors.
	expect(t, keyed(t, ts.URL, "has space", insert), 400)
	expect(t, keyed(t, ts.URL, strings.Repeat("k", 300), insert), 400)

	// Batches: the stored answer covers every statement.
	batch := `{"batch":[{"sql":"INSERT INTO t(v) VALUES ('x')"},{"sql":"INSERT INTO t(v) VALUES ('y') RETURNING id"}]}`
	b1 := keyed(t, ts.URL, "batch-1", batch)
	expect(t, b1, 200)
	b2 := keyed(t, ts.URL, "batch-1", batch)
	expect(t, b2, 200)
	if strip(b1.body) != strip(b2.body) {
		t.Fatalf("replayed batch differs:\n%s\n%s", b1.body, b2.body)
	}
	if n := count(t, ts.URL, ""); n != "3" {
		t.Fatalf("rows = %s, want 3", n)
	}

	// The user's schema is unchanged apart from sluice's own table, which
	// stays out of the way of dumps (it has its own name) and can be read.
	r := query(t, ts.URL, "default", "", `{"sql":"SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"}`)
	expect(t, r, 200)
	if !strings.Contains(string(r.body), `["_sluice_idempotency"],["t"]`) {
		t.Fatalf("tables: %s", r.body)
	}
	expect(t, query(t, ts.URL, "default", "", `{"sql":"SELECT key FROM _sluice_idempotency"}`), 200)

	// Dropping the table forgets every key; the next keyed write recreates it.
	expect(t, query(t, ts.URL, "default", "", `{"sql":"DROP TABLE _sluice_idempotency"}`), 200)
	expect(t, keyed(t, ts.URL, "order-1", insert), 200)
	if n := count(t, ts.URL, ""); n != "4" {
		t.Fatalf("rows after the key table was dropped = %s, want 4", n)
	}
}

// Concurrent retries of one key (the client timed out and retried while the
// first was still queued) run the write once; every answer is the same.
func TestIdempotencyKeyConcurrentRetriesRunOnce(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, query(t, ts.URL, "default", "", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)"}`), 200)
	insert := `{"sql":"INSERT INTO t(v) VALUES ('a') RETURNING id"}`
	var wg sync.WaitGroup
	answers := make([]response, 16)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = keyed(t, ts.URL, "same", insert)
		}()
	}
	wg.Wait()
	for _, a := range answers {
		expect(t, a, 200)
		if !bytes.Contains(a.body, []byte(`"rows":[[1]]`)) {
			t.Fatalf("answer %s, want the first run's id 1", a.body)
		}
	}
	if n := count(t, ts.URL, ""); n != "1" {
		t.Fatalf("rows = %s, want 1", n)
	}
}

// After the window, a key is forgotten: the same request runs again.
func TestIdempotencyWindowExpires(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) { c.IdempotencyWindow = Duration(300 * time.Millisecond) })
	expect(t, query(t, ts.URL, "default", "", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)"}`), 200)
	insert := `{"sql":"INSERT INTO t(v) VALUES ('a')"}`
	expect(t, keyed(t, ts.URL, "k", insert), 200)
	expect(t, keyed(t, ts.URL, "k", insert), 200)
	if n := count(t, ts.URL, ""); n != "1" {
		t.Fatalf("rows within the window = %s, want 1", n)
	}
	time.Sleep(400 * time.Millisecond)
	r := keyed(t, ts.URL, "k", insert)
	expect(t, r, 200)
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("expired key replayed")
	}
	if n := count(t, ts.URL, ""); n != "2" {
		t.Fatalf("rows after the window = %s, want 2", n)
	}
	// Expired keys are pruned on the write path: only the fresh one is left.
	time.Sleep(400 * time.Millisecond)
	expect(t, keyed(t, ts.URL, "k2", insert), 200)
	kr := query(t, ts.URL, "default", "", `{"sql":"SELECT key FROM _sluice_idempotency ORDER BY key"}`)
	expect(t, kr, 200)
	if !strings.Contains(string(kr.body), `"rows":[["k2"]]`) {
		t.Fatalf("keys left: %s", kr.body)
	}
}

// Hrana: a pipeline (and v1 execute) carrying the key replays its writes.
func TestIdempotencyKeyHrana(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, query(t, ts.URL, "default", "", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)"}`), 200)
	pipe := `{"requests":[{"type":"execute","stmt":{"sql":"INSERT INTO t(v) VALUES ('h') RETURNING id"}},` +
		`{"type":"execute","stmt":{"sql":"INSERT INTO t(v) VALUES ('i') RETURNING id"}},{"type":"close"}]}`
	p1 := do(t, "POST", ts.URL+"/v3/pipeline", "", pipe, "Idempotency-Key", "p")
	expect(t, p1, 200)
	p2 := do(t, "POST", ts.URL+"/v3/pipeline", "", pipe, "Idempotency-Key", "p")
	expect(t, p2, 200)
	if p2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("pipeline retry not replayed")
	}
	// Same answer; only the replication index (the bookmark now) may be later.
	index := regexp.MustCompile(`"replication_index":"\d+"`)
	if !bytes.Equal(index.ReplaceAll(p1.body, nil), index.ReplaceAll(p2.body, nil)) {
		t.Fatalf("replayed pipeline differs:\n%s\n%s", p1.body, p2.body)
	}
	exec := `{"stmt":{"sql":"INSERT INTO t(v) VALUES ('j')"}}`
	expect(t, do(t, "POST", ts.URL+"/v1/execute", "", exec, "Idempotency-Key", "e"), 200)
	expect(t, do(t, "POST", ts.URL+"/v1/execute", "", exec, "Idempotency-Key", "e"), 200)
	expect(t, do(t, "POST", ts.URL+"/v1/execute", "", `{"stmt":{"sql":"INSERT INTO t(v) VALUES ('k')"}}`, "Idempotency-Key", "e"), 422)
	if n := count(t, ts.URL, ""); n != "3" {
		t.Fatalf("rows = %s, want 3", n)
	}
}
