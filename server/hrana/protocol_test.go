package hrana

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValuesRoundTripExactly(t *testing.T) {
	ts := newTestServer(t, Config{})
	u := ts.URL + "/db/default"
	_, res := pipe(t, u, nil,
		execReq("CREATE TABLE v (i INTEGER, f REAL, t TEXT, b BLOB, n)"),
		execReq("INSERT INTO v VALUES (?, ?, ?, ?, ?)", int64(9007199254740993), 1.5, "héllo \"q\"\n",
			map[string]any{"type": "blob", "base64": "AAEC/w=="}, nil),
		execReq("SELECT i, f, t, b, n FROM v"),
		closeReq)
	mustOK(t, res[0])
	ins := mustOK(t, res[1])["result"].(map[string]any)
	if ins["affected_row_count"] != 1.0 || ins["last_insert_rowid"] != "1" {
		t.Fatalf("insert result: %v", ins)
	}
	got, _ := json.Marshal(rowsOf(t, mustOK(t, res[2])))
	want := `[[{"type":"integer","value":"9007199254740993"},{"type":"float","value":1.5},{"type":"text","value":"héllo \"q\"\n"},{"base64":"AAEC/w","type":"blob"},{"type":"null"}]]`
	if string(got) != want { // keys in Go's map order: the answer was decoded into maps
		t.Fatalf("row encoding\n got %s\nwant %s", got, want)
	}
	cols := mustOK(t, res[2])["result"].(map[string]any)["cols"].([]any)
	if c := cols[0].(map[string]any); c["name"] != "i" || c["decltype"] != "INTEGER" {
		t.Fatalf("column 0: %v", c)
	}
}

func TestFloatsBindAsSQLiteWould(t *testing.T) {
	ts := newTestServer(t, Config{})
	u := ts.URL
	_, res := pipe(t, u, nil,
		execReq("CREATE TABLE n (x INTEGER)"),
		execReq("INSERT INTO n VALUES (?), (?)", 3.0, 3.5),
		execReq("SELECT typeof(x), x FROM n ORDER BY rowid"),
		closeReq)
	got, _ := json.Marshal(rowsOf(t, mustOK(t, res[2])))
	want := `[[{"type":"text","value":"integer"},{"type":"integer","value":"3"}],[{"type":"text","value":"real"},{"type":"float","value":3.5}]]`
	if string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestNamedArgumentsWithAndWithoutPrefix(t *testing.T) {
	ts := newTestServer(t, Config{})
	named := func(sql string, args map[string]any) map[string]any {
		var list []any
		for k, v := range args {
			list = append(list, map[string]any{"name": k, "value": val(v)})
		}
		return map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql, "named_args": list}}
	}
	_, res := pipe(t, ts.URL, nil,
		named("SELECT :a, @b, $c", map[string]any{":a": 1, "@b": "two", "$c": 3.5}),
		named("SELECT :a + @b + $c", map[string]any{"a": 1, "b": 2, "c": 3}),
		named("SELECT :missing", map[string]any{":other": 1}),
		closeReq)
	got, _ := json.Marshal(rowsOf(t, mustOK(t, res[0])))
	if want := `[[{"type":"integer","value":"1"},{"type":"text","value":"two"},{"type":"float","value":3.5}]]`; string(got) != want {
		t.Fatalf("prefixed: %s", got)
	}
	got, _ = json.Marshal(rowsOf(t, mustOK(t, res[1])))
	if want := `[[{"type":"integer","value":"6"}]]`; string(got) != want {
		t.Fatalf("unprefixed: %s", got)
	}
	mustErr(t, res[2])
}

func TestBatchConditions(t *testing.T) {
	ts := newTestServer(t, Config{})
	ok := func(i int) map[string]any { return map[string]any{"type": "ok", "step": i} }
	er := func(i int) map[string]any { return map[string]any{"type": "error", "step": i} }
	not := func(c map[string]any) map[string]any { return map[string]any{"type": "not", "cond": c} }
	steps := []any{
		map[string]any{"stmt": stmt("SELECT 1")},                                                                               // 0 runs
		map[string]any{"stmt": stmt("SELECT nope FROM nowhere")},                                                               // 1 fails
		map[string]any{"stmt": stmt("SELECT 2"), "condition": ok(1)},                                                           // 2 skipped
		map[string]any{"stmt": stmt("SELECT 3"), "condition": er(1)},                                                           // 3 runs
		map[string]any{"stmt": stmt("SELECT 4"), "condition": map[string]any{"type": "and", "conds": []any{ok(0), er(1)}}},     // 4 runs
		map[string]any{"stmt": stmt("SELECT 5"), "condition": map[string]any{"type": "or", "conds": []any{ok(2), not(ok(0))}}}, // 5 skipped
		map[string]any{"stmt": stmt("SELECT 6"), "condition": map[string]any{"type": "is_autocommit"}},                         // 6 runs
	}
	_, res := pipe(t, ts.URL, nil, map[string]any{"type": "batch", "batch": map[string]any{"steps": steps}}, closeReq)
	r := mustOK(t, res[0])["result"].(map[string]any)
	results, errs := r["step_results"].([]any), r["step_errors"].([]any)
	ran := []bool{true, false, false, true, true, false, true}
	failed := []bool{false, true, false, false, false, false, false}
	for i := range ran {
		if (results[i] != nil) != ran[i] || (errs[i] != nil) != failed[i] {
			t.Fatalf("step %d: result %v error %v", i, results[i], errs[i])
		}
	}
	if msg := errs[1].(map[string]any)["message"].(string); !strings.Contains(msg, "no such table") {
		t.Fatalf("step 1 error: %q", msg)
	}
}

// libSQL clients send batch() as BEGIN, statements, COMMIT, ROLLBACK-unless-
// committed; it must be atomic and go through the write group, not a session.
func TestClientBatchShapeIsAtomicInOneWriteGroup(t *testing.T) {
	ts := newTestServer(t, Config{})
	db := ts.dbs["default"]
	_, res := pipe(t, ts.URL, nil, execReq("CREATE TABLE u (x INTEGER UNIQUE)"), closeReq)
	mustOK(t, res[0])
	shape := func(stmts ...map[string]any) map[string]any {
		steps := []any{map[string]any{"stmt": stmt("BEGIN IMMEDIATE")}}
		for i, s := range stmts {
			steps = append(steps, map[string]any{"stmt": s, "condition": map[string]any{"type": "and", "conds": []any{
				map[string]any{"type": "ok", "step": i},
				map[string]any{"type": "not", "cond": map[string]any{"type": "is_autocommit"}}}}})
		}
		n := len(steps)
		steps = append(steps,
			map[string]any{"stmt": stmt("COMMIT"), "condition": map[string]any{"type": "ok", "step": n - 1}},
			map[string]any{"stmt": stmt("ROLLBACK"), "condition": map[string]any{"type": "not", "cond": map[string]any{"type": "ok", "step": n}}})
		return map[string]any{"type": "batch", "batch": map[string]any{"steps": steps}}
	}
	sessions, writes := db.sess.Load(), db.writes.Load()
	_, res = pipe(t, ts.URL, nil, shape(stmt("INSERT INTO u VALUES (1)"), stmt("INSERT INTO u VALUES (2)")), closeReq)
	r := mustOK(t, res[0])["result"].(map[string]any)
	if r["step_results"].([]any)[3] == nil || r["step_results"].([]any)[4] != nil {
		t.Fatalf("commit should run and rollback be skipped: %v", r)
	}
	if r["replication_index"] == nil {
		t.Fatalf("batch result has no replication_index: %v", r)
	}
	_, res = pipe(t, ts.URL, nil, shape(stmt("INSERT INTO u VALUES (3)"), stmt("INSERT INTO u VALUES (1)")), closeReq)
	r = mustOK(t, res[0])["result"].(map[string]any)
	if r["step_errors"].([]any)[2] == nil || r["step_results"].([]any)[4] == nil {
		t.Fatalf("duplicate should fail and rollback run: %v", r)
	}
	if got := queryValue(t, ts.URL, "SELECT group_concat(x) FROM u"); !reflect.DeepEqual(got, map[string]any{"type": "text", "value": "1,2"}) {
		t.Fatalf("rows after batches: %v (the failed batch must leave nothing)", got)
	}
	if db.sess.Load() != sessions {
		t.Fatalf("a self-contained transaction batch took a session")
	}
	if db.writes.Load() != writes+2 {
		t.Fatalf("want 2 write groups, got %d", db.writes.Load()-writes)
	}
}

func TestReadsGoToTheReadPool(t *testing.T) {
	ts := newTestServer(t, Config{})
	db := ts.dbs["default"]
	pipe(t, ts.URL, nil, execReq("CREATE TABLE r (x)"), closeReq)
	writes := db.writes.Load()
	for range 3 {
		if got := queryValue(t, ts.URL, "SELECT count(*) FROM r"); got.(map[string]any)["value"] != "0" {
			t.Fatalf("count: %v", got)
		}
	}
	if db.writes.Load() != writes {
		t.Fatalf("read-only statements used the writer %d times", db.writes.Load()-writes)
	}
	pipe(t, ts.URL, nil, execReq("INSERT INTO r VALUES (1)"), closeReq)
	if db.writes.Load() != writes+1 {
		t.Fatalf("an INSERT did not go through a write group")
	}
}

func TestInteractiveTransactionAcrossRequests(t *testing.T) {
	ts := newTestServer(t, Config{})
	u := ts.URL
	pipe(t, u, nil, execReq("CREATE TABLE tx (x)"), closeReq)

	baton, res := pipe(t, u, nil, execReq("BEGIN"), execReq("INSERT INTO tx VALUES (1)"), map[string]any{"type": "get_autocommit"})
	mustOK(t, res[1])
	if mustOK(t, res[2])["is_autocommit"] != false {
		t.Fatalf("inside BEGIN the stream must not be in autocommit: %v", res[2])
	}
	if got := queryValue(t, u, "SELECT count(*) FROM tx"); got.(map[string]any)["value"] != "0" {
		t.Fatalf("another stream sees uncommitted rows: %v", got)
	}
	baton, res = pipe(t, u, baton, execReq("INSERT INTO tx VALUES (2)"), execReq("COMMIT"), map[string]any{"type": "get_autocommit"})
	commit := mustOK(t, res[1])["result"].(map[string]any)
	if commit["replication_index"] == nil {
		t.Fatalf("COMMIT result lacks replication_index: %v", commit)
	}
	if mustOK(t, res[2])["is_autocommit"] != true {
		t.Fatalf("after COMMIT the stream must be in autocommit")
	}
	if got := queryValue(t, u, "SELECT count(*) FROM tx"); got.(map[string]any)["value"] != "2" {
		t.Fatalf("committed rows: %v", got)
	}
	baton, res = pipe(t, u, baton, execReq("BEGIN"), execReq("INSERT INTO tx VALUES (3)"), execReq("ROLLBACK"))
	mustOK(t, res[2])
	if got := queryValue(t, u, "SELECT count(*) FROM tx"); got.(map[string]any)["value"] != "2" {
		t.Fatalf("rolled back row visible: %v", got)
	}
	// Closing a stream inside a transaction rolls it back and frees the writer.
	baton, _ = pipe(t, u, baton, execReq("BEGIN"), execReq("INSERT INTO tx VALUES (4)"))
	b, res := pipe(t, u, baton, closeReq)
	if b != nil {
		t.Fatalf("closed stream still has a baton")
	}
	mustOK(t, res[0])
	_, res = pipe(t, u, nil, execReq("INSERT INTO tx VALUES (5)"), closeReq)
	mustOK(t, res[0])
	if got := queryValue(t, u, "SELECT group_concat(x) FROM tx"); got.(map[string]any)["value"] != "1,2,5" {
		t.Fatalf("rows: %v", got)
	}
}

func TestBatonsAreSingleUseAndUnforgeable(t *testing.T) {
	ts := newTestServer(t, Config{}, "a", "b")
	a, b := ts.URL+"/db/a", ts.URL+"/db/b"
	baton1, _ := pipe(t, a, nil, execReq("SELECT 1"))
	baton2, _ := pipe(t, a, baton1, execReq("SELECT 2"))
	if baton1 == baton2 || baton2 == nil {
		t.Fatalf("baton not rotated: %v %v", baton1, baton2)
	}
	status, out := post(t, a+"/v2/pipeline", map[string]any{"baton": baton1, "requests": []any{execReq("SELECT 3")}})
	if status != http.StatusBadRequest || out["code"] != "BATON_REUSED" || out["error"] == "" {
		t.Fatalf("reused baton: %d %v", status, out)
	}
	// Forge by changing the decoded bytes (one in the sequence number, one in
	// the MAC), and by re-spelling the same bytes with non-canonical padding
	// bits: all are refused.
	raw, err := base64.RawURLEncoding.DecodeString(baton2.(string))
	if err != nil {
		t.Fatal(err)
	}
	var forgeries []string
	const streamIDLen = 16 // a baton starts with its stream's id (server/hrana/stream's baton.go)
	for _, i := range []int{streamIDLen + 7, len(raw) - 1} {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		forgeries = append(forgeries, base64.RawURLEncoding.EncodeToString(b))
	}
	s := baton2.(string) // 40 bytes in 54 characters: the last one carries 4 unused bits
	last := strings.IndexByte(base64URLAlphabet, s[len(s)-1])
	forgeries = append(forgeries, s[:len(s)-1]+string(base64URLAlphabet[last|1]))
	for _, forged := range forgeries {
		if forged == s {
			t.Fatalf("forgery equals the baton")
		}
		status, out = post(t, a+"/v2/pipeline", map[string]any{"baton": forged, "requests": []any{execReq("SELECT 3")}})
		if status != http.StatusBadRequest || out["code"] != "BATON_INVALID" {
			t.Fatalf("forged baton %q: %d %v", forged, status, out)
		}
	}
	status, out = post(t, b+"/v2/pipeline", map[string]any{"baton": baton2, "requests": []any{execReq("SELECT 3")}})
	if status != http.StatusBadRequest || out["code"] != "BATON_INVALID" {
		t.Fatalf("baton of database a used on b: %d %v", status, out)
	}
	// The legitimate holder still works.
	_, res := pipe(t, a, baton2, execReq("SELECT 4"), closeReq)
	mustOK(t, res[0])
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestTransactionTimeoutRollsBackAndFreesTheWriter(t *testing.T) {
	ts := newTestServer(t, Config{TxTimeout: 200 * time.Millisecond, IdleTimeout: 10 * time.Second})
	u := ts.URL
	pipe(t, u, nil, execReq("CREATE TABLE tt (x)"), closeReq)
	baton, res := pipe(t, u, nil, execReq("BEGIN"), execReq("INSERT INTO tt VALUES (1)"))
	mustOK(t, res[1])
	// A write from another stream waits for the writer, then succeeds once the
	// abandoned transaction is rolled back.
	_, res = pipe(t, u, nil, execReq("INSERT INTO tt VALUES (2)"), closeReq)
	mustOK(t, res[0])
	status, out := post(t, u+"/v2/pipeline", map[string]any{"baton": baton, "requests": []any{execReq("COMMIT")}})
	if status != http.StatusBadRequest || out["code"] != "TRANSACTION_TIMEOUT" {
		t.Fatalf("late COMMIT: %d %v", status, out)
	}
	if got := queryValue(t, u, "SELECT group_concat(x) FROM tt"); got.(map[string]any)["value"] != "2" {
		t.Fatalf("rows: %v (the timed-out insert must be rolled back)", got)
	}
}

// An idle stream is reaped. One that held nothing (no transaction, no
// changed connection, no stored SQL) is continued by its last baton, as if
// it had never expired; one that held anything answers STREAM_EXPIRED (or
// why it ended), and nothing it began is applied. (Changed connections need
// the real server's shared connections: server/streams_test.go.)
func TestIdleStreamsExpireAndOnlyEmptyOnesContinue(t *testing.T) {
	ts := newTestServer(t, Config{IdleTimeout: 100 * time.Millisecond, TxTimeout: 10 * time.Second})
	u := ts.URL
	pipe(t, u, nil, execReq("CREATE TABLE idle (x)"), closeReq)
	reaped := func() {
		eventually(t, "the idle streams to be reaped", func() bool { return ts.h.streams.Streams() == 0 })
	}
	next := func(baton any, sql string) (int, map[string]any) {
		return post(t, u+"/v2/pipeline", map[string]any{"baton": baton, "requests": []any{execReq(sql)}})
	}

	// Held nothing: continued, twice over, by each newest baton.
	clean, res := pipe(t, u, nil, execReq("INSERT INTO idle VALUES ('clean')"))
	mustOK(t, res[0])
	for round := range 2 {
		reaped()
		status, out := next(clean, "INSERT INTO idle VALUES ('after idling')")
		if status != http.StatusOK {
			t.Fatalf("round %d: a stream that held nothing, after idling out: %d %v", round, status, out)
		}
		mustOK(t, out["results"].([]any)[0].(map[string]any))
		clean = out["baton"]
	}
	// Its earlier batons stay spent.
	status, out := next(clean, "SELECT 1")
	if status != http.StatusOK {
		t.Fatalf("the newest baton: %d %v", status, out)
	}
	if status, out := next(clean, "SELECT 1"); status != http.StatusBadRequest || out["code"] != "BATON_REUSED" {
		t.Fatalf("a spent baton: %d %v", status, out)
	}

	// Held something: refused, its work not applied.
	inTx, _ := pipe(t, u, nil, execReq("BEGIN"), execReq("INSERT INTO idle VALUES ('in a transaction')"))
	stored, _ := pipe(t, u, nil, map[string]any{"type": "store_sql", "sql_id": 1, "sql": "SELECT 1"})
	reaped()
	for name, baton := range map[string]any{"an open transaction": inTx, "stored SQL": stored} {
		if status, out := next(baton, "INSERT INTO idle VALUES ('late')"); status != http.StatusBadRequest || out["code"] != "STREAM_EXPIRED" {
			t.Fatalf("a stream that held %s, after idling out: %d %v", name, status, out)
		}
	}
	if got := queryValue(t, u, "SELECT group_concat(x, '|') FROM idle"); got.(map[string]any)["value"] != "clean|after idling|after idling" {
		t.Fatalf("rows: %v", got)
	}
}

// A transaction rolled back for its length, then idle past the stream's
// timeout, is still told as rolled back: its stream is not continued.
func TestATimedOutTransactionIsToldEvenAfterIdling(t *testing.T) {
	ts := newTestServer(t, Config{TxTimeout: 100 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
	u := ts.URL
	pipe(t, u, nil, execReq("CREATE TABLE tt (x)"), closeReq)
	baton, res := pipe(t, u, nil, execReq("BEGIN"), execReq("INSERT INTO tt VALUES (1)"))
	mustOK(t, res[1])
	eventually(t, "the stream to be reaped", func() bool { return ts.h.streams.Streams() == 0 })
	status, out := post(t, u+"/v2/pipeline", map[string]any{"baton": baton, "requests": []any{execReq("INSERT INTO tt VALUES (2)"), execReq("COMMIT")}})
	if status != http.StatusBadRequest || (out["code"] != "TRANSACTION_TIMEOUT" && out["code"] != "STREAM_EXPIRED") {
		t.Fatalf("a late statement on a timed-out transaction: %d %v", status, out)
	}
	if got := queryValue(t, u, "SELECT count(*) FROM tt"); got.(map[string]any)["value"] != "0" {
		t.Fatalf("rows: %v (nothing of the timed-out transaction may be applied)", got)
	}
}

func TestStoredSQLSequenceDescribe(t *testing.T) {
	ts := newTestServer(t, Config{})
	u := ts.URL
	baton, res := pipe(t, u, nil,
		map[string]any{"type": "sequence", "sql": "CREATE TABLE s (a INTEGER, b TEXT); INSERT INTO s VALUES (1, 'x;y'); -- done\n"},
		map[string]any{"type": "store_sql", "sql_id": 7, "sql": "SELECT a, b FROM s WHERE a = ?"},
		map[string]any{"type": "execute", "stmt": map[string]any{"sql_id": 7, "args": []any{val(1)}}},
		map[string]any{"type": "store_sql", "sql_id": 7, "sql": "SELECT 1"},
		map[string]any{"type": "describe", "sql_id": 7},
		map[string]any{"type": "close_sql", "sql_id": 7},
		map[string]any{"type": "execute", "stmt": map[string]any{"sql_id": 7}},
		map[string]any{"type": "sequence", "sql": "INSERT INTO s VALUES (2, 'z'); INSERT INTO nope VALUES (1); INSERT INTO s VALUES (3, 'w')"},
	)
	mustOK(t, res[0])
	mustOK(t, res[1])
	got, _ := json.Marshal(rowsOf(t, mustOK(t, res[2])))
	if string(got) != `[[{"type":"integer","value":"1"},{"type":"text","value":"x;y"}]]` {
		t.Fatalf("stored statement rows: %s", got)
	}
	if e := mustErr(t, res[3]); e["code"] != "SQL_ID_IN_USE" {
		t.Fatalf("reusing a sql_id: %v", e)
	}
	d := mustOK(t, res[4])["result"].(map[string]any)
	if d["is_readonly"] != true || len(d["params"].([]any)) != 1 || len(d["cols"].([]any)) != 2 {
		t.Fatalf("describe: %v", d)
	}
	mustOK(t, res[5])
	if e := mustErr(t, res[6]); e["code"] != "SQL_ID_NOT_FOUND" {
		t.Fatalf("closed sql_id: %v", e)
	}
	if e := mustErr(t, res[7]); !strings.Contains(e["message"].(string), "no such table") {
		t.Fatalf("failing sequence: %v", e)
	}
	_, res = pipe(t, u, baton, execReq("SELECT group_concat(a) FROM s"), closeReq)
	if got := rowsOf(t, mustOK(t, res[0]))[0].([]any)[0].(map[string]any)["value"]; got != "1,2" {
		t.Fatalf("a sequence keeps what ran before its failing statement and stops there: %v", got)
	}
}

func TestCursorStreamsEntries(t *testing.T) {
	ts := newTestServer(t, Config{})
	pipe(t, ts.URL, nil, execReq("CREATE TABLE c (x)"), execReq("INSERT INTO c VALUES (1), (2)"), closeReq)
	body := `{"baton":null,"batch":{"steps":[{"stmt":{"sql":"SELECT x FROM c ORDER BY x"}},{"stmt":{"sql":"SELECT nope"}},{"condition":{"type":"ok","step":1},"stmt":{"sql":"SELECT 9"}}]}}`
	resp, err := http.Post(ts.URL+"/v3/cursor", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	var types []string
	for dec.More() {
		var e map[string]any
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		if _, ok := e["baton"]; ok {
			types = append(types, "head")
			continue
		}
		types = append(types, fmt.Sprint(e["type"]))
	}
	want := "head step_begin row row step_end step_error"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("cursor entries: %s, want %s", got, want)
	}
}

func TestV1ExecuteAndBatch(t *testing.T) {
	ts := newTestServer(t, Config{})
	status, out := post(t, ts.URL+"/v1/execute", map[string]any{"stmt": stmt("CREATE TABLE one (x UNIQUE)")})
	if status != 200 || out["result"] == nil {
		t.Fatalf("v1 execute: %d %v", status, out)
	}
	status, out = post(t, ts.URL+"/v1/batch", map[string]any{"batch": map[string]any{"steps": []any{
		map[string]any{"stmt": stmt("INSERT INTO one VALUES (1)")},
		map[string]any{"stmt": stmt("SELECT x FROM one"), "condition": map[string]any{"type": "ok", "step": 0}},
	}}})
	if status != 200 || len(out["result"].(map[string]any)["step_results"].([]any)) != 2 {
		t.Fatalf("v1 batch: %d %v", status, out)
	}
	status, out = post(t, ts.URL+"/v1/execute", map[string]any{"stmt": stmt("INSERT INTO one VALUES (1)")})
	if status != http.StatusBadRequest || !strings.HasPrefix(out["code"].(string), "SQLITE_CONSTRAINT") || !strings.Contains(out["message"].(string), "UNIQUE") {
		t.Fatalf("v1 constraint error: %d %v", status, out)
	}
	// A v1 request that leaves a transaction open has it rolled back.
	post(t, ts.URL+"/v1/execute", map[string]any{"stmt": stmt("BEGIN")})
	status, _ = post(t, ts.URL+"/v1/execute", map[string]any{"stmt": stmt("INSERT INTO one VALUES (2)")})
	if status != 200 {
		t.Fatalf("writer still held after a v1 BEGIN")
	}
}

func TestBadInputIsRejectedAndTheServerKeepsServing(t *testing.T) {
	ts := newTestServer(t, Config{})
	for name, body := range map[string]string{
		"malformed":     `{"baton": null, "requests": [`,
		"unknown type":  `{"baton": null, "requests": [{"type": "frobnicate"}]}`,
		"bad value":     `{"baton": null, "requests": [{"type":"execute","stmt":{"sql":"SELECT ?","args":[{"type":"integer","value":"1.5"}]}}]}`,
		"forward cond":  `{"baton": null, "requests": [{"type":"batch","batch":{"steps":[{"condition":{"type":"ok","step":0},"stmt":{"sql":"SELECT 1"}}]}}]}`,
		"no sql":        `{"baton": null, "requests": [{"type":"sequence"}]}`,
		"garbage baton": `{"baton": "!!!", "requests": []}`,
	} {
		status, out := post(t, ts.URL+"/v2/pipeline", body)
		if status != http.StatusBadRequest || out["message"] == "" {
			t.Errorf("%s: %d %v", name, status, out)
		}
	}
	big := `{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT '` + strings.Repeat("x", defaultMaxBodyBytes) + `'"}}]}`
	if status, out := post(t, ts.URL+"/v2/pipeline", big); status != http.StatusBadRequest || out["code"] != "BODY_TOO_LARGE" {
		t.Errorf("oversized body: %d %v", status, out)
	}
	resp, err := http.Get(ts.URL + "/db/default/v3")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v3: %v %v", err, resp)
	}
	resp.Body.Close()
	_, res := pipe(t, ts.URL, nil, execReq("SELECT 42"), closeReq)
	mustOK(t, res[0])
}
