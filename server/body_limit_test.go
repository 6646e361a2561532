package server

import (
	"strings"
	"testing"
)

// One configured body limit governs every route: a limit above the 8 MiB
// default lets a Hrana pipeline of 10 MiB through (Hrana once kept its own
// 8 MiB cap whatever the server was told), and a body over it is refused
// on Hrana and the JSON API alike.
func TestConfiguredBodyLimitAppliesToHranaAndJSON(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) { c.Limits.MaxBodyBytes = 12 << 20 })
	payload := strings.Repeat("x", 10<<20)

	hranaBody := `{"requests":[{"type":"execute","stmt":{"sql":"SELECT length('` + payload + `')"}},{"type":"close"}]}`
	r := do(t, "POST", ts.URL+"/v3/pipeline", "", hranaBody)
	if r.status != 200 || !strings.Contains(string(r.body), `"value":"10485760"`) {
		t.Fatalf("10 MiB Hrana pipeline under a 12 MiB limit: status %d: %.300s", r.status, r.body)
	}
	r = query(t, ts.URL, "default", "", `{"sql":"SELECT length('`+payload+`')"}`)
	if r.status != 200 || !strings.Contains(string(r.body), "10485760") {
		t.Fatalf("10 MiB JSON API query under a 12 MiB limit: status %d: %.300s", r.status, r.body)
	}

	tooBig := strings.Repeat("x", 13<<20)
	for path, body := range map[string]string{
		"/v3/pipeline":                `{"requests":[{"type":"execute","stmt":{"sql":"SELECT length('` + tooBig + `')"}}]}`,
		"/v1/databases/default/query": `{"sql":"SELECT length('` + tooBig + `')"}`,
	} {
		if r := do(t, "POST", ts.URL+path, "", body); r.status != 413 {
			t.Errorf("%s: 13 MiB body over a 12 MiB limit: status %d, want 413: %.300s", path, r.status, r.body)
		}
	}
}
