package hrana_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// pipeline posts one Hrana pipeline to url (a database's base URL) and
// returns the raw answer, failing on anything but 200.
func pipeline(t *testing.T, url string, reqs ...string) []byte {
	t.Helper()
	body := `{"baton":null,"requests":[` + strings.Join(reqs, ",") + `]}`
	resp, err := http.Post(url+"/v3/pipeline", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pipeline: HTTP %d: %s", resp.StatusCode, raw)
	}
	return raw
}

// results decodes a pipeline answer's results.
func results(t *testing.T, raw []byte) []map[string]any {
	t.Helper()
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, raw)
	}
	return out.Results
}

func execute(sql string, args ...string) string {
	return `{"type":"execute","stmt":{"sql":` + jsonString(sql) + `,"args":[` + strings.Join(args, ",") + `]}}`
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

func errorOf(t *testing.T, r map[string]any) (code, message string) {
	t.Helper()
	if r["type"] != "error" {
		t.Fatalf("want an error result, got %v", r)
	}
	e := r["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

// Infinities go out as sqld sends them (null in JSON), which every client's
// JSON decoder accepts; "1e999" broke libsql-client-go's.
func TestInfinityEncodedAsSqldDoes(t *testing.T) {
	url := clientTestServer(t, "inf") + "/db/inf"
	raw := pipeline(t, url, execute("SELECT 1e999, -1e999, 2.5"))
	if !bytes.Contains(raw, []byte(`[{"type":"float","value":null},{"type":"float","value":null},{"type":"float","value":2.5}]`)) {
		t.Fatalf("infinities not encoded as null floats: %s", raw)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("Go's encoding/json cannot decode the answer: %v", err)
	}
}

// A Stmt holds one statement: several are refused before any runs, as sqld
// refuses them; blank and comment-only pieces are not statements.
func TestSeveralStatementsInOneStmtAreRefused(t *testing.T) {
	url := clientTestServer(t, "multi") + "/db/multi"
	res := results(t, pipeline(t, url,
		execute("CREATE TABLE m (x)"),
		execute("INSERT INTO m VALUES (1); INSERT INTO m VALUES (2)"),
		execute("INSERT INTO m VALUES (3); -- done"),
		execute("INSERT INTO m VALUES ('a;b');;"),
		execute("SELECT count(*) FROM m"),
	))
	code, msg := errorOf(t, res[1])
	if code != "SQL_MANY_STATEMENTS" || msg != "SQL string contains more than one statement" {
		t.Fatalf("two statements: %s %q", code, msg)
	}
	for i := 2; i <= 3; i++ {
		if res[i]["type"] != "ok" {
			t.Fatalf("request %d: %v", i, res[i])
		}
	}
	rows := res[4]["response"].(map[string]any)["result"].(map[string]any)["rows"].([]any)
	if got := rows[0].([]any)[0].(map[string]any)["value"]; got != "2" {
		t.Fatalf("rows after the refused Stmt: %v, want 2 (none of its statements ran)", got)
	}
}

// A parameter without an argument is an error, as the spec says (sqld's code
// and wording), not a silent NULL; so are surplus arguments. EXPLAIN
// compiles without values.
func TestArgumentsMustMatchParameters(t *testing.T) {
	url := clientTestServer(t, "args") + "/db/args"
	one := `{"type":"integer","value":"1"}`
	named := func(sql string, names ...string) string {
		var args []string
		for _, n := range names {
			args = append(args, `{"name":`+jsonString(n)+`,"value":`+one+`}`)
		}
		return `{"type":"execute","stmt":{"sql":` + jsonString(sql) + `,"named_args":[` + strings.Join(args, ",") + `]}}`
	}
	res := results(t, pipeline(t, url,
		execute("SELECT ?, ?", one),
		named("SELECT :a, :b", "a"),
		execute("SELECT ?", one, one),
		execute("EXPLAIN SELECT ?"),
		execute("SELECT ?, ?", one, one),
		named("SELECT :a, @b", ":a", "b"),
		execute("SELECT ?2", one, one),
	))
	for i, want := range []string{
		"Arguments do not match SQL parameters: value for parameter 2 not found",
		"Arguments do not match SQL parameters: value for parameter :b not found",
		"Arguments do not match SQL parameters: too many parameters, expected 1 found 2",
	} {
		code, msg := errorOf(t, res[i])
		if code != "ARGS_INVALID" || msg != want {
			t.Errorf("request %d: %s %q, want ARGS_INVALID %q", i, code, msg, want)
		}
	}
	for i := 3; i < len(res); i++ {
		if res[i]["type"] != "ok" {
			t.Errorf("request %d: %v, want ok", i, res[i])
		}
	}
}
