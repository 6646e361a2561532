package hrana_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server"
)

// Tokens of the servers that semServer starts.
const (
	rwToken = "rw-token-sem1"
	roToken = "ro-token-sem1"
)

// semServer starts sluice serve's handler (sync durability to a file
// replica) with a read-write and a read-only token and the named databases.
func semServer(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewWithStore(server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Durability: "sync",
		Tokens: []server.TokenConfig{{Token: rwToken, Access: "rw"}, {Token: roToken, Access: "ro"}}},
		store, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := srv.Host().Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
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

// call POSTs body (raw bytes, or a value to encode) with token and returns
// the status and the decoded answer; timeout bounds the whole exchange.
func call(t *testing.T, url, token string, body any, timeout time.Duration) (int, map[string]any) {
	t.Helper()
	data, ok := body.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: HTTP %d, not JSON: %s", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// hranaPipe sends one Hrana pipeline and returns the baton and the results.
func hranaPipe(t *testing.T, base, db, token string, baton any, reqs ...any) (any, []map[string]any) {
	t.Helper()
	status, out := call(t, base+"/db/"+db+"/v3/pipeline", token, map[string]any{"baton": baton, "requests": reqs}, 30*time.Second)
	if status != http.StatusOK {
		t.Fatalf("pipeline: HTTP %d: %v", status, out)
	}
	var results []map[string]any
	for _, r := range out["results"].([]any) {
		results = append(results, r.(map[string]any))
	}
	return out["baton"], results
}

func hexec(sql string, args ...any) map[string]any {
	vals := []any{}
	for _, a := range args {
		switch v := a.(type) {
		case int:
			b, _ := json.Marshal(v)
			vals = append(vals, map[string]any{"type": "integer", "value": string(b)})
		case string:
			vals = append(vals, map[string]any{"type": "text", "value": v})
		}
	}
	return map[string]any{"type": "execute", "stmt": map[string]any{"sql": sql, "args": vals}}
}

var hclose = map[string]any{"type": "close"}

// okResult returns an ok result's execute result (or fails the test).
func okResult(t *testing.T, what string, r map[string]any) map[string]any {
	t.Helper()
	if r["type"] != "ok" {
		t.Fatalf("%s: want ok, got %v", what, r)
	}
	resp := r["response"].(map[string]any)
	if res, ok := resp["result"].(map[string]any); ok {
		return res
	}
	return resp
}

// hranaRows returns the rows of an execute result as plain values.
func hranaRows(res map[string]any) [][]any {
	var out [][]any
	for _, row := range res["rows"].([]any) {
		var vals []any
		for _, v := range row.([]any) {
			vals = append(vals, v.(map[string]any)["value"])
		}
		out = append(out, vals)
	}
	return out
}

// jsonQuery runs a JSON API query and returns the status and answer.
func jsonQuery(t *testing.T, base, db, token string, body any, timeout time.Duration) (int, map[string]any) {
	t.Helper()
	return call(t, base+"/v1/databases/"+db+"/query", token, body, timeout)
}

// scalar runs sql through the JSON API and returns the first value.
func scalar(t *testing.T, base, db, sql string) any {
	t.Helper()
	status, out := jsonQuery(t, base, db, rwToken, map[string]any{"sql": sql}, 30*time.Second)
	if status != http.StatusOK {
		t.Fatalf("%s: HTTP %d %v", sql, status, out)
	}
	rows := out["results"].([]any)[0].(map[string]any)["rows"].([]any)
	if len(rows) == 0 {
		return nil
	}
	return rows[0].([]any)[0]
}
