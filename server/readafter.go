package server

import (
	"net/http"
	"strconv"

	"github.com/sluicedb/sluice/server/dbhost"
)

// withReadAfter carries the request's Sluice-Bookmark into its context for
// the databases that may answer from an older state than the newest (see
// dbhost.WithReadAfter). A malformed header is left to the handlers that
// report it.
func withReadAfter(r *http.Request) *http.Request {
	v := r.Header.Get(dbhost.BookmarkHeader)
	if v == "" {
		return r
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return r
	}
	return r.WithContext(dbhost.WithReadAfter(r.Context(), dbhost.Bookmark(n)))
}
