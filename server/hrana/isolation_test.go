package hrana

import (
	"net/http"
	"strings"
	"testing"
)

// One client (here: one address, the server has no tokens) may hold
// transactions on at most MaxPinnedDatabases databases at once, since each
// keeps its database open; the refusal names the limit, and ending one
// stream frees its slot.
func TestPinnedDatabasesPerClient(t *testing.T) {
	ts := newTestServer(t, Config{MaxPinnedDatabases: 2}, "a", "b", "c")
	begin := func(db string) (any, map[string]any) {
		baton, res := pipe(t, ts.URL+"/db/"+db, nil, execReq("BEGIN"), execReq("SELECT 1"))
		return baton, res[0]
	}
	batonA, r := begin("a")
	mustOK(t, r)
	_, r = begin("b")
	mustOK(t, r)
	_, r = begin("c")
	e := mustErr(t, r)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "limits.max-pinned-databases") || !strings.Contains(msg, "2 databases") {
		t.Fatalf("third database: %v, want a refusal naming limits.max-pinned-databases", e)
	}
	pipe(t, ts.URL+"/db/a", batonA, execReq("ROLLBACK"), map[string]any{"type": "close"})
	_, r = begin("c")
	mustOK(t, r)
}

// A pipeline longer than MaxPipelineStatements is refused before anything
// runs, with 413 naming the limit; one at the limit runs.
func TestPipelineRequestCap(t *testing.T) {
	ts := newTestServer(t, Config{MaxPipelineStatements: 3})
	reqs := []map[string]any{execReq("SELECT 1"), execReq("SELECT 2"), execReq("SELECT 3"), {"type": "close"}}
	status, out := post(t, ts.URL+"/v2/pipeline", map[string]any{"baton": nil, "requests": reqs})
	if msg, _ := out["message"].(string); status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "limits.max-pipeline-statements") {
		t.Fatalf("4 requests: %d %v, want 413 naming limits.max-pipeline-statements", status, out)
	}
	_, res := pipe(t, ts.URL, nil, reqs[1:]...)
	mustOK(t, res[0])
	// Batch steps count as statements.
	steps := []any{}
	for range 4 {
		steps = append(steps, map[string]any{"stmt": stmt("SELECT 1")})
	}
	status, out = post(t, ts.URL+"/v2/pipeline", map[string]any{"baton": nil, "requests": []any{map[string]any{"type": "batch", "batch": map[string]any{"steps": steps}}}})
	if msg, _ := out["message"].(string); status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "4 statements") {
		t.Fatalf("a batch of 4 steps: %d %v, want 413", status, out)
	}
}
