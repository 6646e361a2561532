package hrana_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// hranaClientScript runs testdata/hrana_client.js (the stock
// @libsql/hrana-client at protocol version 3) against url.
func hranaClientScript(t *testing.T, url string, env ...string) map[string]any {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: %s", installHint)
	}
	modules := filepath.Join(toolsDir(), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "@libsql", "hrana-client", "package.json")); err != nil {
		t.Fatalf("@libsql/hrana-client is not in %s: %s", modules, installHint)
	}
	return runClientScript(t, append(env, "NODE_PATH="+modules), "node", filepath.Join("testdata", "hrana_client.js"), url)
}

// hranaClientExpectations hold for every transport and encoding.
var hranaClientExpectations = map[string]any{
	"version":              3.0,
	"insert.affected":      1.0,
	"insert.rowid":         "1",
	"values.i":             "4611686018427387907",
	"values.f":             -0.5,
	"values.t":             "tëxt",
	"values.b":             "00ff07",
	"values.n":             nil,
	"values.cols":          []any{"i", "f", "t", "b", "n", "inf", "ninf"},
	"named":                "xy",
	"describe.params":      1.0,
	"describe.col":         "name",
	"describe.readonly":    true,
	"afterSequence":        "3",
	"stored":               "2",
	"batch.rows":           4.0,
	"batch.dupError":       hasPrefix("SQLITE_CONSTRAINT"),
	"cursorBatch.rows":     4.0,
	"cursorBatch.dupError": hasPrefix("SQLITE_CONSTRAINT"),
	"autocommitInTx":       false,
	"autocommitAfter":      true,
	"afterRollback":        "0",
	"constraint.rejected":  true,
	"constraint.code":      hasPrefix("SQLITE_CONSTRAINT"),
	"constraint.message":   contains("UNIQUE constraint failed: h.t"),
	"many.code":            "SQL_MANY_STATEMENTS",
	"missingArg.code":      "ARGS_INVALID",
	"stillServing":         "1",
}

// The stock client at Hrana 3 over HTTP finds /v3-protobuf and speaks
// protobuf to the pipeline and cursor endpoints: values (infinities too,
// which protobuf carries), batches with and without a cursor, stored SQL,
// describe, sequence, transactions and errors.
func TestHranaClientProtobufOverHTTP(t *testing.T) {
	url := clientTestServer(t, "pbhttp") + "/db/pbhttp/"
	out := hranaClientScript(t, url)
	expect(t, out, hranaClientExpectations)
	expect(t, out, map[string]any{"encoding": "protobuf", "values.inf": "Infinity", "values.ninf": "-Infinity"})
}
