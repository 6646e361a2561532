package hrana_test

import (
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
