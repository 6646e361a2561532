package hrana_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server"
)

// An answer is capped by limits.max-response-bytes while its rows are
// stepped, all the statements of one request together: the statement that
// would pass the cap is stopped and answered SQLITE_TOOBIG naming the
// limit, in the shape each client parses (a statement's error in a
// pipeline, a step_error in a cursor), and the others are answered whole.

// budgetCap is the answer cap of these tests: 256 KiB, about 1,000 rows of
// budgetRows.
const budgetCap = 256 << 10

// budgetRows is a query of n rows of about 200 bytes each.
func budgetRows(n int) string {
	return fmt.Sprintf("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d) "+
		"SELECT i, printf('%%0180d', i) AS pad FROM n", n)
}

// budgetTestServer is clientTestServer with answers capped at budgetCap.
func budgetTestServer(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Durability: "sync"}
	cfg.Limits.MaxResponseBytes = units.Size(budgetCap)
	srv, err := server.NewWithStore(cfg, store, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatalf("start sluice serve: %v", err)
	}
	if _, err := srv.Host().Create(context.Background(), name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close sluice serve: %v", err)
		}
	})
	return hs.URL
}

func postRaw(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

func executeJSON(sql string) string {
	b, _ := json.Marshal(map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql, "want_rows": true}})
	return string(b)
}

// isTooBig checks a Hrana error object: SQLITE_TOOBIG naming the limit.
func isTooBig(t *testing.T, what string, e map[string]any) {
	t.Helper()
	if e == nil || e["code"] != "SQLITE_TOOBIG" || !strings.Contains(fmt.Sprint(e["message"]), "limits.max-response-bytes") {
		t.Errorf("%s: error %v, want SQLITE_TOOBIG naming limits.max-response-bytes", what, e)
	}
}

// A JSON pipeline: the statement past the cap fails alone, those around it
// are answered, the answer stays under the cap, and statements that each
// fit but not together fail from the one that passes it.
func TestAnswerBudgetJSONPipeline(t *testing.T) {
	url := budgetTestServer(t, "pipe") + "/db/pipe/v3/pipeline"
	type result struct {
		Type     string         `json:"type"`
		Error    map[string]any `json:"error"`
		Response struct {
			Result struct {
				Rows []json.RawMessage `json:"rows"`
			} `json:"result"`
		} `json:"response"`
	}
	run := func(sqls ...string) ([]result, int) {
		reqs := make([]string, len(sqls))
		for i, s := range sqls {
			reqs[i] = executeJSON(s)
		}
		code, raw := postRaw(t, url, `{"baton":null,"requests":[`+strings.Join(reqs, ",")+`,{"type":"close"}]}`)
		if code != http.StatusOK {
			t.Fatalf("pipeline: %d %s", code, raw)
		}
		var out struct{ Results []result }
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("answer: %v: %.300s", err, raw)
		}
		return out.Results, len(raw)
	}

	res, size := run("SELECT 1", budgetRows(20_000), "SELECT 2")
	if res[0].Type != "ok" || res[2].Type != "ok" {
		t.Errorf("the statements around the large one: %+v, %+v", res[0], res[2])
	}
	isTooBig(t, "20,000 rows", res[1].Error)
	if size > budgetCap {
		t.Errorf("the answer is %d bytes, over the cap of %d", size, budgetCap)
	}
	t.Logf("a pipeline asking for 20,000 rows under a %d-byte cap: %d-byte answer, statement error %v", budgetCap, size, res[1].Error["message"])

	res, size = run(budgetRows(800))
	if res[0].Type != "ok" || len(res[0].Response.Result.Rows) != 800 {
		t.Errorf("800 rows under the cap: %s, %d rows", res[0].Type, len(res[0].Response.Result.Rows))
	}
	t.Logf("800 rows: %d-byte answer, whole", size)

	res, _ = run(budgetRows(400), budgetRows(400), budgetRows(400), budgetRows(400))
	if res[0].Type != "ok" || len(res[0].Response.Result.Rows) != 400 {
		t.Errorf("the first of four 400-row statements: %+v", res[0].Error)
	}
	isTooBig(t, "the last of four 400-row statements", res[3].Error)
}

// A JSON cursor: the step past the cap is a step_error, the batch goes on
// (a later step is answered), and a cursor that fits is answered whole
// though it goes out in many pieces.
func TestAnswerBudgetJSONCursor(t *testing.T) {
	url := budgetTestServer(t, "cur") + "/db/cur/v3/cursor"
	steps := func(sqls ...string) string {
		var parts []string
		for _, s := range sqls {
			b, _ := json.Marshal(map[string]any{"stmt": map[string]any{"sql": s, "want_rows": true}})
			parts = append(parts, string(b))
		}
		return `{"baton":null,"batch":{"steps":[` + strings.Join(parts, ",") + `]}}`
	}
	entries := func(body string) []map[string]any {
		code, raw := postRaw(t, url, body)
		if code != http.StatusOK {
			t.Fatalf("cursor: %d %s", code, raw)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		var head map[string]any
		if err := dec.Decode(&head); err != nil {
			t.Fatalf("head: %v", err)
		}
		var out []map[string]any
		for {
			var e map[string]any
			if err := dec.Decode(&e); err == io.EOF {
				return out
			} else if err != nil {
				t.Fatalf("entry %d: %v", len(out), err)
			}
			out = append(out, e)
		}
	}
	got := entries(steps(budgetRows(20_000), "SELECT 7"))
	if len(got) != 4 || got[0]["type"] != "step_error" || got[1]["type"] != "step_begin" || got[2]["type"] != "row" || got[3]["type"] != "step_end" {
		t.Fatalf("entries: %v", got)
	}
	e, _ := got[0]["error"].(map[string]any)
	isTooBig(t, "step 0", e)
	if r := fmt.Sprint(got[2]["row"]); !strings.Contains(r, "7") {
		t.Errorf("step 1's row: %s", r)
	}

	got = entries(steps(budgetRows(800)))
	rows := 0
	for _, e := range got {
		if e["type"] != "row" {
			continue
		}
		rows++
		row, _ := e["row"].([]any)
		first, _ := row[0].(map[string]any)
		if len(row) != 2 || first["type"] != "integer" || first["value"] != fmt.Sprint(rows) {
			t.Fatalf("row entry %d: %v", rows, e)
		}
	}
	if rows != 800 || got[len(got)-1]["type"] != "step_end" {
		t.Errorf("800 rows under the cap: %d row entries, last %v", rows, got[len(got)-1]["type"])
	}
}

// The stock Hrana 3 client over HTTP (protobuf pipeline and cursor) and
// over WebSocket sees the statement past the cap fail with SQLITE_TOOBIG
// naming the limit, the rest answered, and the stream still serving.
func TestAnswerBudgetHranaClient(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: %s", installHint)
	}
	modules := filepath.Join(toolsDir(), "node_modules")
	base := budgetTestServer(t, "hc")
	for _, url := range []string{base + "/db/hc/", "ws" + strings.TrimPrefix(base, "http") + "/db/hc/"} {
		t.Run(url[:strings.Index(url, ":")], func(t *testing.T) {
			out := runClientScript(t, []string{"NODE_PATH=" + modules}, "node", filepath.Join("testdata", "budget_client.js"), url)
			tooBig := map[string]any{"ok": false, "code": "SQLITE_TOOBIG", "message": contains("limits.max-response-bytes")}
			for _, key := range []string{"big", "pipeline.3", "cursor.0"} {
				for k, v := range tooBig {
					expect(t, out, map[string]any{key + "." + k: v})
				}
			}
			expect(t, out, map[string]any{
				"after":           "42",
				"fits.rows":       800.0,
				"pipeline.0.ok":   true,
				"pipeline.2.ok":   true, // sized in protobuf: three fit where JSON fits two
				"cursor.1.rows":   1.0,
				"cursor.5.ok":     false,
				"cursorFits.0":    map[string]any{"ok": true, "rows": 800.0},
				"stillServing":    "1",
				"pipeline.0.rows": 400.0,
			})
		})
	}
}

// The stock Python client (Hrana's JSON pipeline) gets a LibsqlError
// SQLITE_TOOBIG naming the limit, for one statement and for a batch whose
// statements pass it together.
func TestAnswerBudgetPythonClient(t *testing.T) {
	if err := exec.Command("python3", "-c", "import libsql_client").Run(); err != nil {
		t.Fatalf("python3 cannot import libsql_client: %s", installHint)
	}
	url := budgetTestServer(t, "py") + "/db/py/"
	out := runClientScript(t, nil, "python3", filepath.Join("testdata", "budget_client.py"), url)
	expect(t, out, map[string]any{
		"big.ok": false, "big.code": "SQLITE_TOOBIG", "big.message": contains("limits.max-response-bytes"),
		"after":     42.0,
		"fits.rows": 800.0,
		"batch.ok":  false, "batch.code": "SQLITE_TOOBIG",
	})
}

// The stock Go client (database/sql over Hrana's JSON pipeline): the query
// past the cap is an error naming the limit; one under it reads every row.
func TestAnswerBudgetGoClient(t *testing.T) {
	db, err := sql.Open("libsql", budgetTestServer(t, "go")+"/db/go")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	count := func(q string) (int, error) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	}
	if n, err := count(budgetRows(20_000)); err == nil || !strings.Contains(err.Error(), "limits.max-response-bytes") {
		t.Errorf("20,000 rows: %d rows, error %v; want an error naming limits.max-response-bytes", n, err)
	} else {
		t.Logf("libsql-client-go: %v", err)
	}
	if n, err := count(budgetRows(800)); err != nil || n != 800 {
		t.Errorf("800 rows: %d, %v", n, err)
	}
}

// A batch that leaves a transaction open runs first inside a read or write
// group, then again on a session of its own: its rows count once, not once
// per run (two runs of 600 rows would pass the cap; one does not).
func TestAnswerBudgetBatchRunAgain(t *testing.T) {
	url := budgetTestServer(t, "again") + "/db/again/v3/pipeline"
	stepsJSON := func(sqls ...string) string {
		var parts []string
		for _, s := range sqls {
			b, _ := json.Marshal(map[string]any{"stmt": map[string]any{"sql": s, "want_rows": true}})
			parts = append(parts, string(b))
		}
		return strings.Join(parts, ",")
	}
	body := `{"baton":null,"requests":[{"type":"batch","batch":{"steps":[` +
		stepsJSON("BEGIN", budgetRows(600), "COMMIT", "BEGIN") + `]}},{"type":"close"}]}`
	code, raw := postRaw(t, url, body)
	if code != http.StatusOK {
		t.Fatalf("pipeline: %d %s", code, raw)
	}
	var out struct {
		Results []struct {
			Type     string
			Response struct {
				Result struct {
					StepResults []*struct {
						Rows []json.RawMessage `json:"rows"`
					} `json:"step_results"`
					StepErrors []map[string]any `json:"step_errors"`
				} `json:"result"`
			} `json:"response"`
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer: %v: %.300s", err, raw)
	}
	res := out.Results[0].Response.Result
	if out.Results[0].Type != "ok" || len(res.StepResults) != 4 || res.StepResults[1] == nil || len(res.StepResults[1].Rows) != 600 {
		t.Fatalf("the batch's 600 rows: %.600s", raw)
	}
	for i, e := range res.StepErrors {
		if e != nil {
			t.Errorf("step %d: %v", i, e)
		}
	}
}
