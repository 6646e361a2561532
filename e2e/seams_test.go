package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// Same SQL as a local file where two mechanisms meet, against sluice serving
// with a file replica and with MinIO (sync durability), each compared with a
// local SQLite file through the same client:
//   - 300 @libsql/client clients writing at once to a schema with a
//     DEFERRABLE INITIALLY DEFERRED foreign key (Django's way), 100 of them
//     violating it: every valid write is acknowledged, each violator alone is
//     answered SQLITE_CONSTRAINT, and the replica holds exactly what was
//     acknowledged;
//   - a trigger whose body holds CASE ... END, sent as one statement over
//     Hrana HTTP, Hrana WebSocket and the JSON API;
//   - the code of unique and foreign-key violations as applications compare
//     it: SQLite's primary code, as sqld sends it;
//   - "DELETE ...; SELECT 1" through the JSON API, answered per statement.
func TestSameSQLAsAFileAtTheSeams(t *testing.T) {
	t.Parallel()
	m := testenv.MinIO(t)
	dir := t.TempDir()
	local := filepath.Join(dir, "local.db")
	script := nodeScript("seams/run.js")
	want := script(t, target{kind: "local", http: "file:" + local, ws: "file:" + local, file: local, work: mkdir(t, dir, "local"), runNo: 1})
	// sqld answers a SQLite error with its primary code (libsql-server,
	// hrana/stmt.rs: ConstraintViolation => "SQLITE_CONSTRAINT"), and
	// @libsql/client on a local file maps the same way: the reference must
	// say so, or it is no reference.
	for _, tp := range []string{"http", "ws"} {
		for _, step := range []string{"unique violation", "foreign key violation", "deferred foreign key violation", "deferred foreign key violation in a batch"} {
			name := tp + " " + step
			if code := stepField(want, name, "code"); code != "SQLITE_CONSTRAINT" {
				t.Fatalf("local file, step %q: code %v, want SQLITE_CONSTRAINT (sqld's code)", name, code)
			}
		}
	}
	wantTally := map[string]any{"violator SQLITE_CONSTRAINT: FOREIGN KEY constraint failed": 100.0, "valid ok": 200.0}
	if got := want["concurrent outcomes"].(map[string]any)["ok"]; !reflect.DeepEqual(got, wantTally) {
		t.Fatalf("local file, concurrent outcomes %v, want %v", got, wantTally)
	}
	wantJSON := jsonAPISeams(t, localQuery(t, filepath.Join(dir, "jsonapi.db")))

	bucket := m.NewBucket(t)
	fileRoot := filepath.Join(dir, "replica")
	for _, s := range []struct {
		name    string
		env     []string
		replica func(db string) string
	}{
		{"file replica", nil, func(db string) string { return "file://" + filepath.Join(fileRoot, db) }},
		{"MinIO", m.Env(), func(db string) string { return m.URL(bucket, db) }},
	} {
		t.Run(s.name, func(t *testing.T) {
			host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
			data := t.TempDir()
			p := start(t, s.env, sluiceBin, "serve", "-durability", "sync", "-data", data,
				"-replica", s.replica(""), "-listen", host)
			waitUntil(t, 60*time.Second, func() bool { return readyCode("http://"+host+"/ready") == 200 }, p)
			defer func() {
				if t.Failed() {
					t.Logf("sluice serve output:\n%s", lastLines(p.out.String(), 40))
				}
			}()
			const db = "seams"
			createDatabase(t, "http://"+host, db)
			got := script(t, target{kind: "sluice", http: "http://" + host + "/db/" + db + "/", ws: "ws://" + host + "/db/" + db + "/",
				host: host, db: db, work: mkdir(t, t.TempDir(), "sluice"), runNo: 1})
			t.Logf("@libsql/client: %d steps, %d as on a local file; concurrent writers: %v", len(want), len(want)-countDiffs(want, got),
				got["concurrent outcomes"])
			if diff := diffSteps(want, got); diff != "" {
				t.Errorf("sluice differs from a local file with the same client:%s", diff)
			}

			createDatabase(t, "http://"+host, "jsonapi")
			gotJSON := jsonAPISeams(t, serverQuery(t, "http://"+host, "jsonapi"))
			t.Logf("JSON API, DELETE FROM n; SELECT 1: %v", gotJSON[5])
			if !reflect.DeepEqual(gotJSON, wantJSON) {
				t.Errorf("JSON API differs from a local file:\n local:  %v\n sluice: %v", wantJSON, gotJSON)
			}
			if status, out := serverQuery(t, "http://"+host, "jsonapi")(`{"sql": "INSERT INTO n VALUES (?); SELECT ?", "params": [1]}`); status != 400 {
				t.Errorf("several statements with params: HTTP %d %v, want a 400", status, out)
			}

			// Over raw Hrana the extended code travels beside sqld's code.
			pipe := `{"requests": [{"type": "execute", "stmt": {"sql": "INSERT INTO u_http VALUES (1)"}}, {"type": "close"}]}`
			resp, err := http.Post("http://"+host+"/db/"+db+"/v2/pipeline", "application/json", bytes.NewReader([]byte(pipe)))
			if err != nil {
				t.Fatal(err)
			}
			var pout struct {
				Results []struct {
					Error struct {
						Code         string `json:"code"`
						ExtendedCode string `json:"extended_code"`
					} `json:"error"`
				} `json:"results"`
			}
			err = json.NewDecoder(resp.Body).Decode(&pout)
			resp.Body.Close()
			if err != nil || len(pout.Results) == 0 || pout.Results[0].Error.Code != "SQLITE_CONSTRAINT" || pout.Results[0].Error.ExtendedCode != "SQLITE_CONSTRAINT_UNIQUE" {
				t.Errorf("Hrana unique violation: %+v, %v; want code SQLITE_CONSTRAINT, extended_code SQLITE_CONSTRAINT_UNIQUE", pout, err)
			}

			// Every acknowledged write, and nothing else, is in the replica.
			restored := filepath.Join(t.TempDir(), "restored.db")
			mustSluice(t, s.env, "restore", "-o", restored, s.replica(db))
			acked := got["concurrent acknowledged"].(map[string]any)["ok"]
			var valid, children int64
			rdb, err := sql.Open("sqlite", "file:"+restored+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			if err := rdb.QueryRow("SELECT (SELECT count(*) FROM vv), (SELECT count(*) FROM cc)").Scan(&valid, &children); err != nil {
				t.Fatal(err)
			}
			t.Logf("concurrent writers: %v acknowledged, %d valid rows and %d violating rows restored from the replica", acked, valid, children)
			if acked != float64(valid) || valid != 200 || children != 0 {
				t.Errorf("restored %d valid and %d violating rows, acknowledged %v; want 200, 0, 200", valid, children, acked)
			}
			if served, rest := tablesDigest(t, filepath.Join(data, db+".db")), tablesDigest(t, restored); served != rest {
				t.Errorf("the replica differs from the served database:\nserved:   %s\nrestored: %s", served, rest)
			}
		})
	}
}

// stepField is field of a step's "ok" outcome in a client script's output.
func stepField(out map[string]any, step, field string) any {
	s, _ := out[step].(map[string]any)
	ok, _ := s["ok"].(map[string]any)
	return ok[field]
}

// queryFunc posts one JSON API query body and returns the status and the answer.
type queryFunc func(body string) (int, map[string]any)

// seamsTrigger's CASE ... END comes right before a ';' inside the body: a
// splitter that ends a trigger at the first "END;" cuts it in two.
const seamsTrigger = "CREATE TRIGGER tr AFTER INSERT ON jt BEGIN UPDATE jt SET a = CASE WHEN b > 0 THEN 1 ELSE 0 END; END;"

// jsonAPISeams runs the JSON API's part of the scenario and returns what a
// user reads of each answer.
func jsonAPISeams(t *testing.T, q queryFunc) []any {
	t.Helper()
	var out []any
	for _, body := range []string{
		`{"sql": "CREATE TABLE jt (a INTEGER, b INTEGER)"}`,
		`{"sql": "` + seamsTrigger + `"}`,
		`{"sql": "INSERT INTO jt (b) VALUES (5), (-1)"}`,
		`{"sql": "SELECT a, b FROM jt ORDER BY rowid"}`,
		`{"sql": "CREATE TABLE n (x); INSERT INTO n VALUES (1), (2), (3)"}`,
		`{"sql": "DELETE FROM n; SELECT 1"}`,
		`{"sql": "SELECT count(*) FROM n"}`,
	} {
		status, ans := q(body)
		var results []any
		for _, r := range asSlice(ans["results"]) {
			r, _ := r.(map[string]any)
			meta, _ := r["meta"].(map[string]any)
			results = append(results, map[string]any{"rows": r["rows"], "changes": meta["changes"]})
		}
		out = append(out, map[string]any{"status": status, "results": results, "error": ans["error"]})
	}
	return out
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// serverQuery posts to sluice's JSON API.
func serverQuery(t *testing.T, base, db string) queryFunc {
	return func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(base+"/v1/databases/"+db+"/query", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: answer is not JSON: %s", body, raw)
		}
		return resp.StatusCode, out
	}
}

// localQuery answers the same bodies from a local SQLite file, statement by
// statement as SQLite runs a script: each statement's rows and changes, in
// the JSON API's shape.
func localQuery(t *testing.T, path string) queryFunc {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	// The statements of each body, as a user wrote them.
	stmts := map[string][]string{
		`{"sql": "CREATE TABLE jt (a INTEGER, b INTEGER)"}`:                 {"CREATE TABLE jt (a INTEGER, b INTEGER)"},
		`{"sql": "` + seamsTrigger + `"}`:                                   {seamsTrigger},
		`{"sql": "INSERT INTO jt (b) VALUES (5), (-1)"}`:                    {"INSERT INTO jt (b) VALUES (5), (-1)"},
		`{"sql": "SELECT a, b FROM jt ORDER BY rowid"}`:                     {"SELECT a, b FROM jt ORDER BY rowid"},
		`{"sql": "CREATE TABLE n (x); INSERT INTO n VALUES (1), (2), (3)"}`: {"CREATE TABLE n (x)", "INSERT INTO n VALUES (1), (2), (3)"},
		`{"sql": "DELETE FROM n; SELECT 1"}`:                                {"DELETE FROM n", "SELECT 1"},
		`{"sql": "SELECT count(*) FROM n"}`:                                 {"SELECT count(*) FROM n"},
	}
	return func(body string) (int, map[string]any) {
		t.Helper()
		var results []any
		for _, s := range stmts[body] {
			rows, err := db.Query(s)
			if err != nil {
				t.Fatalf("local %s: %v", s, err)
			}
			cols, _ := rows.Columns()
			out := []any{}
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				row := make([]any, len(vals))
				for i, v := range vals {
					if n, ok := v.(int64); ok {
						row[i] = float64(n) // as JSON decodes it
					} else {
						row[i] = v
					}
				}
				out = append(out, row)
			}
			rows.Close()
			// Only INSERT, UPDATE and DELETE change rows (sqlite3_changes
			// keeps the last of them through other statements).
			var changes int64
			if kw := strings.ToUpper(strings.Fields(s)[0]); kw == "INSERT" || kw == "UPDATE" || kw == "DELETE" {
				if err := db.QueryRow("SELECT changes()").Scan(&changes); err != nil {
					t.Fatal(err)
				}
			}
			results = append(results, map[string]any{"rows": out, "meta": map[string]any{"changes": float64(changes)}})
		}
		if results == nil {
			t.Fatalf("no local statements for %s", body)
		}
		return 200, map[string]any{"results": results}
	}
}
