package server

import (
	"strings"
	"testing"
)

// Errors raised before the Hrana handler runs (bad name, no token, token
// for another database, body too large, unknown path) answer in Hrana's
// shape on Hrana routes, so a libSQL client shows their message; the JSON
// API keeps its "error" object.
func TestHranaRoutesAnswerErrorsInHranaShape(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "rw-token-123", Access: "rw"}, {Token: "only-a-token", Access: "rw", Databases: []string{"a"}}}
		c.Limits.MaxBodyBytes = 1 << 10
	})
	pipeline := `{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"close"}]}`
	cases := []struct {
		name, path, token, body string
		status                  int
		inMessage               string
	}{
		{"bad database name", "/db/no%20pe/v2/pipeline", "rw-token-123", pipeline, 400, "name"},
		{"no token", "/v2/pipeline", "", pipeline, 401, "token"},
		{"token for another database", "/db/b/v3/pipeline", "only-a-token", pipeline, 403, `"b"`},
		{"body over the limit", "/v3/pipeline", "rw-token-123", strings.Repeat(" ", 2<<10) + pipeline, 413, "limit"},
		{"unknown Hrana path", "/db/a/v3/nope", "rw-token-123", pipeline, 404, "not a sluice endpoint"},
		{"database URL without its trailing slash", "/db/v2/pipeline", "rw-token-123", pipeline, 404, "trailing slash"},
		{"sqld execute without a token", "/v1/execute", "", `{"stmt":{"sql":"SELECT 1"}}`, 401, "token"},
	}
	for _, c := range cases {
		r := do(t, "POST", ts.URL+c.path, c.token, c.body)
		if r.status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want exactly application/json (clients parse errors only then)", c.name, ct)
		}
		m := r.json(t)
		msg, _ := m["message"].(string)
		if !strings.Contains(strings.ToLower(msg), strings.ToLower(c.inMessage)) || m["code"] == nil {
			t.Errorf("%s: body %s, want a top-level message containing %q and a code", c.name, r.body, c.inMessage)
		}
	}
	// The JSON API keeps its own shape.
	r := do(t, "POST", ts.URL+"/v1/databases/a/query", "", `{"sql":"SELECT 1"}`)
	if r.status != 401 || r.errorCode(t) != "UNAUTHORIZED" {
		t.Fatalf("JSON API without a token: %d %s", r.status, r.body)
	}
}
