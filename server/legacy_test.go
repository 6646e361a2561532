package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// sqld's legacy API (POST / and POST /db/NAME/ with {"statements": [...]}):
// answers shaped as sqld shapes them, rows as a local file holds them, and
// the auth, per-database scope and read-only rules of Hrana.

func legacyTokens(c *Config) {
	c.Tokens = []TokenConfig{
		{Token: "rw-token-123", Access: "rw"},
		{Token: "ro-token-123", Access: "ro"},
		{Token: "only-lg-token", Access: "rw", Databases: []string{"lg"}},
	}
}

// legacyPost posts statements (a JSON array) and returns the status and the
// body with each query_duration_ms removed (it varies).
func legacyPost(t *testing.T, url, token, statements string, hdr ...string) (int, string) {
	t.Helper()
	r := do(t, "POST", url, token, `{"statements": `+statements+`}`, hdr...)
	var v any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber() // keep numbers as written: 2.0 stays a real, big integers exact
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: answer %d is not JSON: %s", url, r.status, r.body)
	}
	if steps, ok := v.([]any); ok {
		for _, s := range steps {
			if m, ok := s.(map[string]any); ok {
				if res, ok := m["results"].(map[string]any); ok {
					if _, ok := res["query_duration_ms"].(json.Number); !ok {
						t.Fatalf("no query_duration_ms in %s", r.body)
					}
					delete(res, "query_duration_ms")
				}
			}
		}
		b, _ := json.Marshal(v)
		return r.status, string(b)
	}
	return r.status, string(r.body)
}

// localLegacyRows runs setup and then query on a local file and renders the
// rows as sqld's legacy API writes them.
func localLegacyRows(t *testing.T, setup []string, query string) string {
	t.Helper()
	conn, err := sqlite.OpenConn(filepath.Join(t.TempDir(), "local.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range setup {
		if err := sqlitex.ExecuteTransient(conn, q, nil); err != nil {
			t.Fatalf("local %s: %v", q, err)
		}
	}
	rows := [][]any{}
	err = sqlitex.ExecuteTransient(conn, query, &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
		var row []any
		for i := 0; i < s.ColumnCount(); i++ {
			switch s.ColumnType(i) {
			case sqlite.TypeInteger:
				row = append(row, s.ColumnInt64(i))
			case sqlite.TypeFloat:
				row = append(row, json.RawMessage(jsonFloat(s.ColumnFloat(i))))
			case sqlite.TypeText:
				row = append(row, s.ColumnText(i))
			case sqlite.TypeBlob:
				b := make([]byte, s.ColumnLen(i))
				s.ColumnBytes(i, b)
				row = append(row, map[string]string{"base64": base64.RawStdEncoding.EncodeToString(b)})
			default:
				row = append(row, nil)
			}
		}
		rows = append(rows, row)
		return nil
	}})
	if err != nil {
		t.Fatalf("local %s: %v", query, err)
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

// jsonFloat renders a real as sqld does: 2.0, not 2.
func jsonFloat(f float64) string {
	b, _ := json.Marshal(f)
	if !strings.ContainsAny(string(b), ".e") {
		return string(b) + ".0"
	}
	return string(b)
}

func TestLegacyAPIAnswersAsSqld(t *testing.T) {
	eachStore(t, legacyTokens, []string{"default", "lg"}, func(t *testing.T, base string) {
		const rw = "rw-token-123"
		setup := []string{
			"CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, b BLOB, r REAL, big INTEGER)",
			"INSERT INTO t (name, b, r, big) VALUES ('a', x'68656c6c6f0a', 2.0, 9007199254740993)",
			"INSERT INTO t (name, r, big) VALUES ('b', 0.25, 1)",
		}
		// The same rows written through the API's parameters: positional
		// (a blob as unpadded base64, a whole real, a big integer) and named
		// (a key without its prefix, a boolean as an integer).
		status, got := legacyPost(t, base+"/db/lg/", rw, `[
			"CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, b BLOB, r REAL, big INTEGER)",
			{"q": "INSERT INTO t (name, b, r, big) VALUES (?, ?, ?, ?)", "params": ["a", {"base64": "aGVsbG8K"}, 2.0, 9007199254740993]},
			{"q": "INSERT INTO t (name, r, big) VALUES (:name, :r, :big)", "params": {":name": "b", "r": 0.25, ":big": true}},
			"SELECT * FROM t ORDER BY id"]`)
		want := `[{"results":{"columns":[],"rows":[],"rows_read":0,"rows_written":0}},` +
			`{"results":{"columns":[],"rows":[],"rows_read":0,"rows_written":1}},` +
			`{"results":{"columns":[],"rows":[],"rows_read":0,"rows_written":1}},` +
			`{"results":{"columns":["id","name","b","r","big"],"rows":` + localLegacyRows(t, setup, "SELECT * FROM t ORDER BY id") + `,"rows_read":2,"rows_written":0}}]`
		if status != 200 || got != want {
			t.Fatalf("statements and parameters:\n got %d %s\nwant 200 %s", status, got, want)
		}
		// A failing statement answers its error; the ones after it do not run (null).
		status, got = legacyPost(t, base+"/db/lg/", rw, `["INSERT INTO t (name) VALUES ('a')", "INSERT INTO t (name) VALUES ('never')"]`)
		if want := `[{"error":"UNIQUE constraint failed: t.name"},null]`; status != 200 || got != want {
			t.Fatalf("a failing statement: %d %s, want 200 %s", status, got, want)
		}
		// A transaction the failure left open is rolled back whole.
		status, got = legacyPost(t, base+"/db/lg/", rw, `["BEGIN", "INSERT INTO t (name) VALUES ('c')", "INSERT INTO t (name) VALUES ('a')", "COMMIT"]`)
		if !strings.HasPrefix(got, `[{"results":`) || !strings.Contains(got, `{"error":"UNIQUE constraint failed: t.name"},null]`) {
			t.Fatalf("a failing transaction: %d %s", status, got)
		}
		if _, got = legacyPost(t, base+"/db/lg/", rw, `["SELECT count(*) FROM t"]`); !strings.Contains(got, `"rows":[[2]]`) {
			t.Fatalf("after the failed transaction (its insert must be rolled back, nothing left open): %s", got)
		}
		// What sqld refuses before running anything, with 400 and {"error": ...}.
		for _, bad := range []struct{ stmts, says string }{
			{`["SELECT 1; SELECT 2"]`, "more than one command"},
			{`["BEGIN", "INSERT INTO t (name) VALUES ('open')"]`, "interactive transaction not allowed"},
			{`["SAVEPOINT s", "RELEASE s"]`, "savepoints are not supported"},
		} {
			status, got := legacyPost(t, base+"/db/lg/", rw, bad.stmts)
			var e struct{ Error string }
			_ = json.Unmarshal([]byte(got), &e)
			if status != 400 || !strings.Contains(e.Error, bad.says) {
				t.Fatalf("%s: %d %s, want 400 with an error saying %q", bad.stmts, status, got, bad.says)
			}
		}
		if status, _ := legacyPost(t, base+"/db/lg/", rw, `[{"sql": "SELECT 1"}]`); status != 422 {
			t.Fatalf("a statement object without q: %d, want 422", status)
		}
		// POST / serves the database Hrana's root routes serve: "default",
		// or the one x-namespace names.
		legacyPost(t, base+"/", rw, `["CREATE TABLE d (x)", "INSERT INTO d VALUES (1)"]`)
		if _, got := legacyPost(t, base+"/", rw, `["SELECT count(*) FROM d"]`); !strings.Contains(got, `"rows":[[1]]`) {
			t.Fatalf("POST / on the default database: %s", got)
		}
		if _, got := legacyPost(t, base+"/", rw, `["SELECT count(*) FROM t"]`, "x-namespace", "lg"); !strings.Contains(got, `"rows":[[2]]`) {
			t.Fatalf("POST / with x-namespace: lg: %s", got)
		}
		// Auth, scope and read-only rules.
		if status, _ := legacyPost(t, base+"/db/lg/", "", `["SELECT 1"]`); status != 401 {
			t.Fatalf("no token: %d, want 401", status)
		}
		if status, _ := legacyPost(t, base+"/", "only-lg-token", `["SELECT 1"]`); status != 403 {
			t.Fatalf("a token for lg on the default database: %d, want 403", status)
		}
		if status, got := legacyPost(t, base+"/db/lg/", "only-lg-token", `["SELECT count(*) FROM t"]`); status != 200 || !strings.Contains(got, `"rows":[[2]]`) {
			t.Fatalf("a token for lg on lg: %d %s", status, got)
		}
		status, got = legacyPost(t, base+"/db/lg/", "ro-token-123", `["SELECT count(*) FROM t", "INSERT INTO t (name) VALUES ('ro')"]`)
		if status == 200 && !strings.Contains(got, `"error"`) {
			t.Fatalf("a read-only token wrote: %s", got)
		}
		if _, got := legacyPost(t, base+"/db/lg/", rw, `["SELECT count(*) FROM t WHERE name = 'ro'"]`); !strings.Contains(got, `"rows":[[0]]`) {
			t.Fatalf("the read-only token's row is there: %s", got)
		}
		t.Logf("read-only write answered %d %s", status, got)
	})
}
