package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/sluicedb/sluice/replica"
)

// A token refused a database must cost the bucket nothing: no lease asked,
// no object written, whatever route it tries. Without that, a read-only
// token for one database could fill the bucket with a lease object per name
// it guesses.
func TestRefusedNameLeavesNoObjectInTheBucket(t *testing.T) {
	s, ts, store := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "admin-token-1", Access: "rw"}, {Token: "only-a-reader", Access: "ro", Databases: []string{"a"}}}
	})
	if s.forward == nil {
		t.Fatal("requests are not routed by lease in this configuration; the test would prove nothing")
	}
	pipeline := `{"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"close"}]}`
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/databases/b", ""},
		{http.MethodPost, "/v1/databases/b/query", `{"sql":"SELECT 1"}`},
		{http.MethodPut, "/v1/databases/b", ""},
		{http.MethodDelete, "/v1/databases/b", ""},
		{http.MethodPost, "/db/b/v2/pipeline", pipeline},
		{http.MethodPost, "/db/b/v3/pipeline", pipeline},
		{http.MethodGet, "/db/b/info", ""},
		{http.MethodPut, "/v1/databases/a", ""}, // may read a, not create it
	} {
		r := do(t, c.method, ts.URL+c.path, "only-a-reader", c.body)
		if r.status != http.StatusForbidden {
			t.Errorf("%s %s with a token for another database: %d %s, want 403", c.method, c.path, r.status, r.body)
		}
	}
	bucketHoldsNothing(t, store, "refused requests")
	// The same server still serves the token's own database.
	if r := do(t, http.MethodPut, ts.URL+"/v1/databases/a", "admin-token-1", ""); r.status/100 != 2 {
		t.Fatalf("create a: %d %s", r.status, r.body)
	}
	if r := query(t, ts.URL, "a", "only-a-reader", `{"sql":"SELECT 1"}`); r.status != http.StatusOK {
		t.Fatalf("read a with its token: %d %s", r.status, r.body)
	}
}

// A database asked for and not found leaves nothing in the bucket either:
// the lease taken to look for it is deleted, not left behind released.
func TestMissingDatabaseLeavesNoLeaseBehind(t *testing.T) {
	s, ts, store := newTestServer(t, func(c *Config) {
		c.Tokens = []TokenConfig{{Token: "admin-token-1", Access: "rw"}}
	})
	if s.forward == nil {
		t.Fatal("requests are not routed by lease in this configuration; the test would prove nothing")
	}
	for i, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/databases/ghost", ""},
		{http.MethodPost, "/v1/databases/ghost2/query", `{"statements":["SELECT 1"]}`},
		{http.MethodGet, "/v1/databases/ghost", ""}, // asked again: still nothing
	} {
		r := do(t, c.method, ts.URL+c.path, "admin-token-1", c.body)
		if r.status < 400 {
			t.Errorf("%d: %s %s: %d %s, want an error", i, c.method, c.path, r.status, r.body)
		}
	}
	bucketHoldsNothing(t, store, "requests for a missing database")
	// Created afterwards, the name works as any other.
	if r := do(t, http.MethodPut, ts.URL+"/v1/databases/ghost", "admin-token-1", ""); r.status/100 != 2 {
		t.Fatalf("create ghost: %d %s", r.status, r.body)
	}
	if r := query(t, ts.URL, "ghost", "admin-token-1", `{"sql":"SELECT 1"}`); r.status != http.StatusOK {
		t.Fatalf("query ghost: %d %s", r.status, r.body)
	}
}

func bucketHoldsNothing(t *testing.T, store replica.Store, what string) {
	t.Helper()
	objs, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		t.Errorf("%s left %s in the bucket", what, o.Key)
	}
}
