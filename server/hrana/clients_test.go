package hrana_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server"
	_ "github.com/tursodatabase/libsql-client-go/libsql" // registers the "libsql" database/sql driver
)

// The stock libSQL clients, run
// unmodified against sluice serve's HTTP handler (router, auth, dbhost's group
// commit and sessions, sync durability to a file replica) over real SQLite.
// They live in hrana_test because package server imports hrana.

// clientTestServer starts sluice serve's handler on 127.0.0.1 with a new
// database called name and returns the base URL.
func clientTestServer(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewWithStore(server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Durability: "sync"},
		store, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatalf("start sluice serve: %v", err)
	}
	if _, err := srv.Host().Create(context.Background(), name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
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

const installHint = "run scripts/install-test-deps.sh (pins in scripts/package.json and scripts/requirements-test.txt: @libsql/client 0.18.0 and libsql-client 0.3.1)"

func toolsDir() string {
	if d := os.Getenv("SLUICE_TOOLS"); d != "" {
		return d
	}
	return "/root/.cache/sluice-tools"
}

// runClientScript runs a client script with a deadline and decodes the JSON it prints.
func runClientScript(t *testing.T, env []string, name string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", name, args, err, stdout.String(), stderr.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("%s printed no JSON: %v\n%s\nstderr: %s", name, err, stdout.String(), stderr.String())
	}
	t.Logf("%s observed: %s", filepath.Base(args[0]), stdout.String())
	return out
}

// expect compares observed values at dotted paths.
func expect(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for path, w := range want {
		var cur any = got
		for _, k := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				cur = nil
				break
			}
			cur = m[k]
		}
		if check, ok := w.(func(any) bool); ok {
			if !check(cur) {
				t.Errorf("%s = %#v: not as expected", path, cur)
			}
			continue
		}
		if !reflect.DeepEqual(cur, w) {
			t.Errorf("%s = %#v, want %#v", path, cur, w)
		}
	}
}

func contains(sub string) func(any) bool {
	return func(v any) bool { s, ok := v.(string); return ok && strings.Contains(s, sub) }
}

func hasPrefix(p string) func(any) bool {
	return func(v any) bool { s, ok := v.(string); return ok && strings.HasPrefix(s, p) }
}

func TestNodeClient(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: %s", installHint)
	}
	modules := filepath.Join(toolsDir(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@libsql", "client", "package.json")); err != nil {
		t.Fatalf("@libsql/client is not in %s: %s", modules, installHint)
	}
	url := clientTestServer(t, "nodedb") + "/db/nodedb/"
	out := runClientScript(t, []string{"NODE_PATH=" + modules}, "node", filepath.Join("testdata", "node_client.js"), url)
	expect(t, out, nodeClientExpectations)
}

// nodeClientExpectations hold for node_client.js over every transport.
var nodeClientExpectations = map[string]any{
	"insert.rowsAffected":    1.0,
	"insert.lastInsertRowid": "1",
	"values.i":               "1152921504606846977", // 2^60+1: beyond 2^53, exact
	"values.iType":           "bigint",
	"values.f":               1.25,
	"values.s":               "text ü \"q\"",
	"values.b":               "000102ff",
	"values.n":               nil,
	"values.ti":              "integer",
	"floatIntoInteger":       "integer",
	"named":                  "8,9",
	"batch.results":          3.0,
	"batch.count":            "6",
	"batchError.rejected":    true,
	"batchError.code":        hasPrefix("SQLITE_CONSTRAINT"),
	"batchError.message":     contains("UNIQUE constraint failed"),
	"afterBatchError":        "0",
	"txCommit.seenInside":    "1",
	"txCommit.after":         "1",
	"txRollback":             "0",
	"readTx.count":           "7",
	"readTx.write.rejected":  true,
	"constraint.rejected":    true,
	"constraint.name":        "LibsqlError",
	"constraint.code":        hasPrefix("SQLITE_CONSTRAINT"),
	"constraint.message":     contains("UNIQUE constraint failed: t.s"),
	"syntax.rejected":        true,
	"syntax.message":         contains("syntax error"),
	"stillServing":           "1",
	"executeMultiple":        "3",
}

func TestPythonClient(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is not installed: %s", installHint)
	}
	if err := exec.Command("python3", "-c", "import libsql_client").Run(); err != nil {
		t.Fatalf("python3 cannot import libsql_client: %s", installHint)
	}
	url := clientTestServer(t, "pydb") + "/db/pydb/"
	out := runClientScript(t, nil, "python3", filepath.Join("testdata", "python_client.py"), url)
	expect(t, out, map[string]any{
		"insert.rows_affected":     1.0,
		"insert.last_insert_rowid": 1.0,
		"values.i":                 "1152921504606846977",
		"values.f":                 1.25,
		"values.s":                 "text ü",
		"values.b":                 "000102ff",
		"values.n":                 nil,
		"named":                    8.0,
		"float_into_integer":       "integer",
		"batch.results":            3.0,
		"batch.count":              5.0,
		"batch_error.rejected":     true,
		"batch_error.code":         hasPrefix("SQLITE_CONSTRAINT"),
		"after_batch_error":        0.0,
		"constraint.rejected":      true,
		"constraint.message":       contains("UNIQUE constraint failed: p.s"),
		"syntax.rejected":          true,
		"syntax.message":           contains("syntax error"),
		// libsql-client's HTTP transport has no interactive transactions: it
		// refuses them itself, before reaching the server.
		"transaction.code": "TRANSACTIONS_NOT_SUPPORTED",
		"still_serving":    1.0,
	})
}

func TestGoClient(t *testing.T) {
	url := clientTestServer(t, "godb") + "/db/godb"
	db, err := sql.Open("libsql", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	mustExecSQL := func(q string, args ...any) sql.Result {
		t.Helper()
		res, err := db.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return res
	}
	mustExecSQL("CREATE TABLE g (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT UNIQUE, b BLOB, n)")
	big := int64(1)<<60 + 1
	res := mustExecSQL("INSERT INTO g (i, f, s, b, n) VALUES (?, ?, ?, ?, ?)", big, 1.25, "text ü", []byte{0, 1, 2, 255}, nil)
	if id, _ := res.LastInsertId(); id != 1 {
		t.Fatalf("LastInsertId = %d", id)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("RowsAffected = %d", n)
	}
	var (
		i int64
		f float64
		s string
		b []byte
		n sql.NullString
	)
	if err := db.QueryRowContext(ctx, "SELECT i, f, s, b, n FROM g WHERE id = 1").Scan(&i, &f, &s, &b, &n); err != nil {
		t.Fatal(err)
	}
	if i != big || f != 1.25 || s != "text ü" || !bytes.Equal(b, []byte{0, 1, 2, 255}) || n.Valid {
		t.Fatalf("values: %d %v %q %x %v", i, f, s, b, n)
	}

	mustExecSQL("INSERT INTO g (i, s) VALUES (:i, :s)", sql.Named("i", 8), sql.Named("s", "eight"))
	var eight int64
	if err := db.QueryRowContext(ctx, "SELECT i FROM g WHERE s = ?", "eight").Scan(&eight); err != nil || eight != 8 {
		t.Fatalf("named args: %d %v", eight, err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO g (i, s) VALUES (?, ?)", 20, "twenty"); err != nil {
		t.Fatal(err)
	}
	var inside int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM g WHERE s = 'twenty'").Scan(&inside); err != nil || inside != 1 {
		t.Fatalf("row inside the transaction: %d %v", inside, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO g (i, s) VALUES (?, ?)", 21, "twentyone"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var count int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM g WHERE s IN ('twenty', 'twentyone')").Scan(&count); err != nil || count != 1 {
		t.Fatalf("after commit and rollback: %d rows, %v (want only the committed one)", count, err)
	}

	_, err = db.ExecContext(ctx, "INSERT INTO g (s) VALUES ('eight')")
	if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed: g.s") {
		t.Fatalf("constraint violation: %v", err)
	}
	// A multi-statement Exec becomes a batch.
	mustExecSQL("INSERT INTO g (i, s) VALUES (30, 'a'); INSERT INTO g (i, s) VALUES (31, 'b')")
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM g WHERE s IN ('a', 'b')").Scan(&count); err != nil || count != 2 {
		t.Fatalf("multi-statement exec: %d %v", count, err)
	}
}

// The stock Go client's interactive transaction, under a token of its own,
// commits durably while another token holds every stream it may open and
// keeps asking for more (which it is refused, loudly).
func TestGoClientTransactionUnaffectedByAnotherTokensStreamFlood(t *testing.T) {
	dir := t.TempDir()
	store, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewWithStore(server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Durability: "sync",
		Tokens: []server.TokenConfig{{Token: "flooder-123", Access: "ro", Databases: []string{"a"}}, {Token: "victim-1234", Databases: []string{"b"}}},
		Hrana:  server.Hrana{MaxStreamsPerToken: 50, IdleTimeout: server.Duration(time.Hour)}},
		store, slog.New(slog.DiscardHandler), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := srv.Host().Create(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	refused := 0
	for i := 0; i < 200; i++ {
		req, _ := http.NewRequest("POST", hs.URL+"/db/a/v3/pipeline",
			strings.NewReader(`{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}}]}`))
		req.Header.Set("Authorization", "Bearer flooder-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused != 150 {
		t.Fatalf("flooder refused %d times, want 150 (quota 50 of 200)", refused)
	}
	db, err := sql.Open("libsql", hs.URL+"/db/b?authToken=victim-1234")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("victim's committed rows: %d %v, want 1", n, err)
	}
}
