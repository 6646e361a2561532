package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/server/hrana"
	"github.com/sluicedb/sluice/server/jsonapi"
)

// writeError answers r with err in the shape its client reads: Hrana
// clients look for a top-level message, JSON API clients for an "error"
// object. Errors raised before a handler runs (authentication, body limit,
// unknown path, forwarding) go through here so that a libSQL client shows
// their reason instead of a bare status.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if isHranaPath(r.URL.Path) {
		hrana.WriteError(w, err)
		return
	}
	jsonapi.WriteError(w, err)
}

// hranaPaths are the Hrana protocol's routes, served at the root and under
// /db/<name>.
var hranaPaths = []string{"/v2", "/v3", "/v2/pipeline", "/v3/pipeline", "/v3/cursor",
	"/v3-protobuf", "/v3-protobuf/pipeline", "/v3-protobuf/cursor", "/v1/execute", "/v1/batch"}

// isHranaPath reports whether path belongs to the Hrana protocol: one of
// hranaPaths, anything under /db/<name>, and the WebSocket endpoint at the
// root.
func isHranaPath(path string) bool {
	return path == "/" || strings.HasPrefix(path, "/db/") || slices.Contains(hranaPaths, path)
}

// droppedDatabaseName reports a Hrana request for /db/v2/... or /db/v3...:
// what a client sends when given libsql://HOST/db/NAME without a trailing
// slash, because it resolves "v2/pipeline" relative to the URL.
func droppedDatabaseName(path string) bool {
	rest, ok := strings.CutPrefix(path, "/db/")
	return ok && (strings.HasPrefix(rest, "v2/") || strings.HasPrefix(rest, "v3/") || strings.HasPrefix(rest, "v3-protobuf/"))
}
