package hrana_test

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func nodeModules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: %s", installHint)
	}
	modules := filepath.Join(toolsDir(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@libsql", "client", "package.json")); err != nil {
		t.Fatalf("@libsql/client is not in %s: %s", modules, installHint)
	}
	return modules
}

func wsURL(httpURL string) string { return "ws" + strings.TrimPrefix(httpURL, "http") }

// The stock JS client given a ws:// URL speaks Hrana over WebSocket (hrana2,
// the version it asks for): the same script as over HTTP, the same results,
// interactive transactions included.
func TestNodeClientWebSocket(t *testing.T) {
	modules := nodeModules(t)
	url := wsURL(clientTestServer(t, "nodews")) + "/db/nodews"
	out := runClientScript(t, []string{"NODE_PATH=" + modules}, "node", filepath.Join("testdata", "node_client.js"), url)
	expect(t, out, nodeClientExpectations)
}

// hrana-client at Hrana 3 over WebSocket negotiates hrana3-protobuf: cursors,
// get_autocommit, stored SQL (connection-wide), describe and sequence.
func TestHranaClientProtobufOverWebSocket(t *testing.T) {
	url := wsURL(clientTestServer(t, "pbws")) + "/db/pbws"
	out := hranaClientScript(t, url)
	expect(t, out, hranaClientExpectations)
	expect(t, out, map[string]any{"encoding": "hrana3-protobuf", "values.inf": "Infinity", "values.ninf": "-Infinity"})
}

func pythonClient(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is not installed: %s", installHint)
	}
	if err := exec.Command("python3", "-c", "import libsql_client").Run(); err != nil {
		t.Fatalf("python3 cannot import libsql_client: %s", installHint)
	}
}

var pythonWSExpectations = map[string]any{
	"insert.rows_affected":     1.0,
	"insert.last_insert_rowid": 1.0,
	"values.i":                 "1152921504606846977",
	"values.f":                 1.25,
	"values.s":                 "text ü",
	"values.b":                 "000102ff",
	"values.n":                 nil,
	"named":                    5.0,
	"batch.results":            2.0,
	"batch.count":              2.0,
	"rollback.inside":          1.0,
	"rollback.after":           0.0,
	"commit.inside":            1.0,
	"commit.after":             1.0,
	"tx_error.rejected":        true,
	"tx_error.code":            hasPrefix("SQLITE_CONSTRAINT"),
	"after_tx_error":           0.0,
	"constraint.rejected":      true,
	"constraint.message":       contains("UNIQUE constraint failed: w.s"),
	"syntax.rejected":          true,
	"syntax.message":           contains("syntax error"),
	"still_serving":            1.0,
}

// PyPI libsql-client does interactive transactions only over WebSocket:
// BEGIN; INSERT; ROLLBACK leaves nothing, COMMIT keeps the row, an error
// inside the transaction leaves it usable.
func TestPythonClientWebSocket(t *testing.T) {
	pythonClient(t)
	url := wsURL(clientTestServer(t, "pyws")) + "/db/pyws"
	out := runClientScript(t, nil, "python3", filepath.Join("testdata", "python_ws_client.py"), url)
	expect(t, out, pythonWSExpectations)
}

// goClientOverWebSocket runs libsql-client-go's WebSocket driver (hrana1)
// through values, errors and interactive transactions on db.
func goClientOverWebSocket(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	mustExec := func(q string, args ...any) sql.Result {
		t.Helper()
		res, err := db.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return res
	}
	mustExec("CREATE TABLE g (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT UNIQUE, b BLOB)")
	big := int64(1)<<60 + 1
	res := mustExec("INSERT INTO g (i, f, s, b) VALUES (?, ?, ?, ?)", big, 1.25, "text ü", []byte{0, 1, 255})
	if id, _ := res.LastInsertId(); id != 1 {
		t.Fatalf("LastInsertId = %d", id)
	}
	var (
		i int64
		f float64
		s string
		b []byte
	)
	if err := db.QueryRowContext(ctx, "SELECT i, f, s, b FROM g WHERE id = ?", 1).Scan(&i, &f, &s, &b); err != nil {
		t.Fatal(err)
	}
	if i != big || f != 1.25 || s != "text ü" || !bytes.Equal(b, []byte{0, 1, 255}) {
		t.Fatalf("values: %d %v %q %x", i, f, s, b)
	}
	conn, err := db.Conn(ctx) // one WebSocket connection, one stream
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO g (s) VALUES ('rolled back')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO g (s) VALUES ('committed')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM g WHERE s IN ('rolled back', 'committed')").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after rollback and commit: %d rows, %v (want only the committed one)", n, err)
	}
	_, err = db.ExecContext(ctx, "INSERT INTO g (s) VALUES ('text ü')")
	if err == nil || !strings.Contains(err.Error(), "UNIQUE constraint failed: g.s") {
		t.Fatalf("constraint violation: %v", err)
	}
}

// libsql-client-go given a ws:// URL speaks hrana1 over WebSocket.
func TestGoClientWebSocket(t *testing.T) {
	db, err := sql.Open("libsql", wsURL(clientTestServer(t, "gows"))+"/db/gows")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	goClientOverWebSocket(t, db)
}
