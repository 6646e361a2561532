package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// trickyRows holds values whose encodings are easy to get wrong: escapes,
// HTML characters, U+2028, invalid UTF-8, floats that must stay floats,
// integers beyond 2^53, blobs, NULL and empty text.
const trickyRows = `{"batch": [
	{"sql": "CREATE TABLE v (i INTEGER PRIMARY KEY, t TEXT, f REAL, b BLOB, n)"},
	{"sql": "INSERT INTO v (t, f, b, n) VALUES ('héllo \"q\"\n\t<&>' || char(8232) || char(1), 1.5, x'00ff10', NULL)"},
	{"sql": "INSERT INTO v (t, f, b, n) VALUES (CAST(x'ff41' AS TEXT), 3.0, x'', 9007199254740993)"},
	{"sql": "INSERT INTO v (t, f, b, n) VALUES ('', 1e300, NULL, -0.0)"}
]}`

const trickySelect = `SELECT i, t, f, b, n FROM v ORDER BY i`

// A read streams its rows from SQLite into the answer; a write batch
// collects them as values first. Both must encode every value byte for byte
// the same, on the JSON API and on Hrana.
func TestStreamedReadsEncodeLikeCollectedRows(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, do(t, "PUT", ts.URL+"/v1/databases/enc", "", ""), 201)
	expect(t, query(t, ts.URL, "enc", "", trickyRows), 200)

	rowsOf := func(body []byte, i int) string {
		var out struct {
			Results []struct {
				Columns json.RawMessage `json:"columns"`
				Rows    json.RawMessage `json:"rows"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Results) <= i {
			t.Fatalf("answer %s: %v", body, err)
		}
		return string(out.Results[i].Columns) + " " + string(out.Results[i].Rows)
	}
	read := query(t, ts.URL, "enc", "", `{"sql": "`+trickySelect+`"}`)
	expect(t, read, 200)
	readBatch := query(t, ts.URL, "enc", "", `{"batch": [{"sql": "SELECT 1"}, {"sql": "`+trickySelect+`"}]}`)
	expect(t, readBatch, 200)
	written := query(t, ts.URL, "enc", "", `{"batch": [{"sql": "UPDATE v SET i = i WHERE 0"}, {"sql": "`+trickySelect+`"}]}`)
	expect(t, written, 200)
	want := rowsOf(written.body, 1)
	if got := rowsOf(read.body, 0); got != want {
		t.Fatalf("JSON API, streamed read:\n got %s\nwant %s", got, want)
	}
	if got := rowsOf(readBatch.body, 1); got != want {
		t.Fatalf("JSON API, streamed read batch:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(want, `"héllo \"q\"\n\t\u003c\u0026\u003e\u2028\u0001"`) {
		t.Fatalf("text not escaped as encoding/json does: %s", want)
	}
	if !strings.Contains(want, "9007199254740993") || !strings.Contains(want, "3.0") || !strings.Contains(want, `"\ufffdA"`) {
		t.Fatalf("exact integers, floats that stay floats and invalid UTF-8: %s", want)
	}
	if cl := read.header.Get("Content-Length"); cl == "" {
		t.Fatal("a read's answer is written in one piece with a Content-Length")
	}

	// Hrana: a pipeline's execute streams its rows; a cursor collects them.
	pipeline := `{"requests": [{"type": "execute", "stmt": {"sql": "` + trickySelect + `"}}, {"type": "close"}]}`
	pr := do(t, "POST", ts.URL+"/db/enc/v2/pipeline", "", pipeline)
	expect(t, pr, 200)
	var pout struct {
		Results []struct {
			Type     string
			Response struct {
				Result struct {
					Rows []json.RawMessage `json:"rows"`
				} `json:"result"`
			} `json:"response"`
		} `json:"results"`
	}
	if err := json.Unmarshal(pr.body, &pout); err != nil || len(pout.Results) != 2 || pout.Results[0].Type != "ok" {
		t.Fatalf("pipeline answer %s: %v", pr.body, err)
	}
	cursor := `{"batch": {"steps": [{"stmt": {"sql": "` + trickySelect + `"}}]}}`
	cr := do(t, "POST", ts.URL+"/db/enc/v3/cursor", "", cursor)
	expect(t, cr, 200)
	var cursorRows []string
	sc := bufio.NewScanner(bytes.NewReader(cr.body))
	for sc.Scan() {
		var entry struct {
			Type string
			Row  json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &entry); err == nil && entry.Type == "row" {
			cursorRows = append(cursorRows, string(entry.Row))
		}
	}
	got := pout.Results[0].Response.Result.Rows
	if len(got) != 3 || len(cursorRows) != 3 {
		t.Fatalf("pipeline rows %d, cursor rows %d, want 3 each:\n%s\n%s", len(got), len(cursorRows), pr.body, cr.body)
	}
	for i := range got {
		if string(got[i]) != cursorRows[i] {
			t.Fatalf("Hrana row %d:\n streamed %s\ncollected %s", i, got[i], cursorRows[i])
		}
	}
}

// /metrics reports the PUT requests per 1,000 acknowledged writes and what
// they would cost in a month.
func TestMetricsReportPutCost(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, do(t, "PUT", ts.URL+"/v1/databases/cost", "", ""), 201)
	expect(t, query(t, ts.URL, "cost", "", `{"sql": "CREATE TABLE t (x)"}`), 200)
	for range 5 {
		expect(t, query(t, ts.URL, "cost", "", `{"sql": "INSERT INTO t VALUES (1)"}`), 200)
	}
	m := do(t, "GET", ts.URL+"/metrics", "", "")
	expect(t, m, 200)
	value := func(name string) float64 {
		for _, line := range strings.Split(string(m.body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				var f float64
				if err := json.Unmarshal([]byte(v), &f); err != nil {
					t.Fatalf("%s: %q", name, v)
				}
				return f
			}
		}
		t.Fatalf("/metrics lacks %s:\n%s", name, m.body)
		return 0
	}
	acked, puts := value("sluice_writes_acknowledged_total"), value("sluice_store_put_requests")
	if acked != 6 || puts < 6 {
		t.Fatalf("%v writes acknowledged (want 6, one upload each), %v PUTs", acked, puts)
	}
	if per := value("sluice_puts_per_1000_writes"); per != puts*1000/acked {
		t.Fatalf("PUTs per 1,000 writes %v, want %v", per, puts*1000/acked)
	}
	if usd := value("sluice_estimated_monthly_put_cost_usd"); usd <= 0 {
		t.Fatalf("estimated monthly cost %v, want > 0", usd)
	}
}

// The streamed path carries what the collected one does: repeated column
// names, declared types (Hrana), a statement text holding no statement, and
// a "sql" of several statements (a result each). A batch entry of several
// statements is refused: its one result could describe only the last.
func TestStreamedReadsKeepResultShape(t *testing.T) {
	_, ts, _ := newTestServer(t, nil)
	expect(t, do(t, "PUT", ts.URL+"/v1/databases/shape", "", ""), 201)
	expect(t, query(t, ts.URL, "shape", "", `{"sql": "CREATE TABLE s (i INTEGER, t TEXT)"}`), 200)
	expect(t, query(t, ts.URL, "shape", "", `{"sql": "INSERT INTO s VALUES (7, 'x')"}`), 200)

	expect(t, query(t, ts.URL, "shape", "", `{"batch": [{"sql": "SELECT 1"}, {"sql": "SELECT 1 AS one; SELECT t AS last FROM s"}]}`), 400)
	r := query(t, ts.URL, "shape", "", `{"batch": [{"sql": ""}, {"sql": "SELECT i AS a, t AS a FROM s"}, {"sql": "SELECT t AS last FROM s"}]}`)
	expect(t, r, 200)
	var out struct {
		Results []struct {
			Columns json.RawMessage `json:"columns"`
			Rows    json.RawMessage `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Results) != 3 {
		t.Fatalf("answer %s: %v", r.body, err)
	}
	for i, want := range []string{`[] []`, `["a","a"] [[7,"x"]]`, `["last"] [["x"]]`} {
		if got := string(out.Results[i].Columns) + " " + string(out.Results[i].Rows); got != want {
			t.Errorf("JSON API statement %d: got %s, want %s", i+1, got, want)
		}
	}

	r = query(t, ts.URL, "shape", "", `{"sql": "SELECT 1 AS one; SELECT t AS last FROM s"}`)
	expect(t, r, 200)
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Results) != 2 {
		t.Fatalf("answer %s: %v; want a result per statement", r.body, err)
	}
	for i, want := range []string{`["one"] [[1]]`, `["last"] [["x"]]`} {
		if got := string(out.Results[i].Columns) + " " + string(out.Results[i].Rows); got != want {
			t.Errorf("JSON API script statement %d: got %s, want %s", i+1, got, want)
		}
	}

	pipeline := `{"requests": [{"type": "execute", "stmt": {"sql": "SELECT i AS a, t AS a, 1.5 AS f FROM s"}}, {"type": "close"}]}`
	pr := do(t, "POST", ts.URL+"/db/shape/v2/pipeline", "", pipeline)
	expect(t, pr, 200)
	var pout struct {
		Results []struct {
			Type     string
			Response struct {
				Result struct {
					Cols json.RawMessage `json:"cols"`
					Rows json.RawMessage `json:"rows"`
				} `json:"result"`
			} `json:"response"`
		} `json:"results"`
	}
	if err := json.Unmarshal(pr.body, &pout); err != nil || len(pout.Results) != 2 || pout.Results[0].Type != "ok" {
		t.Fatalf("pipeline answer %s: %v", pr.body, err)
	}
	res := pout.Results[0].Response.Result
	wantCols := `[{"name":"a","decltype":"INTEGER"},{"name":"a","decltype":"TEXT"},{"name":"f","decltype":null}]`
	wantRows := `[[{"type":"integer","value":"7"},{"type":"text","value":"x"},{"type":"float","value":1.5}]]`
	if string(res.Cols) != wantCols || string(res.Rows) != wantRows {
		t.Fatalf("Hrana execute:\n got %s %s\nwant %s %s", res.Cols, res.Rows, wantCols, wantRows)
	}
}
