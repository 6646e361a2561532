package server

import (
	"net/http/httptest"
	"testing"

	"github.com/sluicedb/sluice/server/dbhost"
)

// A request's Sluice-Bookmark reaches the databases through its context (a
// cold open answering before its lease waits for a newer one); no header,
// or a malformed one, leaves the request as it was.
func TestReadAfterCarriesTheBookmark(t *testing.T) {
	for _, c := range []struct {
		header string
		want   dbhost.Bookmark
	}{{"", 0}, {"42", 42}, {"x", 0}, {"0", 0}} {
		r := httptest.NewRequest("POST", "/v1/databases/app/query", nil)
		if c.header != "" {
			r.Header.Set(dbhost.BookmarkHeader, c.header)
		}
		got := dbhost.ReadAfter(withReadAfter(r).Context())
		if got != c.want {
			t.Errorf("header %q: bookmark %d in the context, want %d", c.header, got, c.want)
		}
	}
}
