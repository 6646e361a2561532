package hrana

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dbhost"
)

// testServer serves the handler the way the server's router will: the
// database comes from /db/<name>/, else the x-namespace header, else "default".
type testServer struct {
	*httptest.Server
	h   *Handler
	dbs map[string]*testDB
}

func newTestServer(t *testing.T, cfg Config, names ...string) *testServer {
	t.Helper()
	if len(names) == 0 {
		names = []string{"default"}
	}
	ts := &testServer{h: NewHandler(cfg), dbs: map[string]*testDB{}}
	for _, n := range names {
		ts.dbs[n] = openTestDB(t, n)
	}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "default"
		if rest, ok := strings.CutPrefix(r.URL.Path, "/db/"); ok {
			name, _, _ = strings.Cut(rest, "/")
		} else if ns := r.Header.Get("x-namespace"); ns != "" {
			name = ns
		}
		db, ok := ts.dbs[name]
		if !ok {
			http.Error(w, "no database "+name, http.StatusNotFound)
			return
		}
		ts.h.ServeHTTP(w, r.WithContext(WithDatabase(r.Context(), dbhost.Database(db))))
	}))
	t.Cleanup(func() {
		ts.Server.Close()
		ts.h.Close()
	})
	return ts
}

// post sends body (a JSON-able value or a raw string) and decodes the answer.
func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	var data []byte
	if s, ok := body.(string); ok {
		data = []byte(s)
	} else {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("POST %s: content type %q, want exactly application/json (body %s)", url, ct, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: answer is not JSON: %v: %s", url, err, raw)
	}
	return resp.StatusCode, out
}

// pipe sends one pipeline and returns the baton and results, failing on a
// non-200 answer.
func pipe(t *testing.T, url string, baton any, reqs ...map[string]any) (any, []map[string]any) {
	t.Helper()
	status, out := post(t, url+"/v2/pipeline", map[string]any{"baton": baton, "requests": reqs})
	if status != http.StatusOK {
		t.Fatalf("pipeline: HTTP %d: %v", status, out)
	}
	var results []map[string]any
	for _, r := range out["results"].([]any) {
		results = append(results, r.(map[string]any))
	}
	if len(results) != len(reqs) {
		t.Fatalf("pipeline: %d results for %d requests", len(results), len(reqs))
	}
	return out["baton"], results
}

func execReq(sql string, args ...any) map[string]any {
	return map[string]any{"type": "execute", "stmt": stmt(sql, args...)}
}

func stmt(sql string, args ...any) map[string]any {
	vals := []any{}
	for _, a := range args {
		vals = append(vals, val(a))
	}
	return map[string]any{"sql": sql, "args": vals}
}

func val(a any) map[string]any {
	switch v := a.(type) {
	case nil:
		return map[string]any{"type": "null"}
	case int:
		return map[string]any{"type": "integer", "value": itoa(int64(v))}
	case int64:
		return map[string]any{"type": "integer", "value": itoa(v)}
	case float64:
		return map[string]any{"type": "float", "value": v}
	case string:
		return map[string]any{"type": "text", "value": v}
	case map[string]any:
		return v
	}
	panic("val: unsupported type")
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

var closeReq = map[string]any{"type": "close"}

// mustOK returns the response of an ok result.
func mustOK(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	if r["type"] != "ok" {
		t.Fatalf("want ok, got %v", r)
	}
	return r["response"].(map[string]any)
}

func mustErr(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	if r["type"] != "error" {
		t.Fatalf("want error, got %v", r)
	}
	return r["error"].(map[string]any)
}

// rowsOf returns the rows of an execute response.
func rowsOf(t *testing.T, resp map[string]any) []any {
	t.Helper()
	return resp["result"].(map[string]any)["rows"].([]any)
}

// queryValue runs sql on a fresh stream and returns the first column of the first row.
func queryValue(t *testing.T, url, sql string) any {
	t.Helper()
	_, res := pipe(t, url, nil, execReq(sql), closeReq)
	rows := rowsOf(t, mustOK(t, res[0]))
	if len(rows) == 0 {
		return nil
	}
	return rows[0].([]any)[0]
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
