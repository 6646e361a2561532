package jsonapi

import (
	"bytes"
	"encoding/gob"
	"net/http"
	"strconv"

	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/httpjson"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Retry support: the answer a keyed write stores for its replays, and the
// durability check of a bookmark that a COMMITTED_NOT_DURABLE answer carried.

// encodeResults is the stored answer of a keyed write (gob keeps int64,
// floats such as Inf, and blobs exact).
func encodeResults(results []sqlconn.Result) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(results); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeResults overwrites results with a stored answer.
func decodeResults(b []byte, results []sqlconn.Result) error {
	var stored []sqlconn.Result
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&stored); err != nil {
		return err
	}
	if len(stored) != len(results) {
		return badRequest("the stored answer has " + strconv.Itoa(len(stored)) + " results, the request " + strconv.Itoa(len(results)))
	}
	copy(results, stored)
	return nil
}

// bookmark answers GET /v1/databases/{name}/bookmark/{bookmark}: whether the
// commit at that bookmark is in the bucket, and the database's durable
// bookmark. It holds while the server keeps its data directory; after a loss
// of local data a write may have been lost, which only an Idempotency-Key
// retry settles.
func (a *API) bookmark(w http.ResponseWriter, r *http.Request) {
	name, ok := pathDatabase(w, r, false)
	if !ok {
		return
	}
	want, err := strconv.ParseUint(r.PathValue("bookmark"), 10, 64)
	if err != nil || want == 0 {
		WriteError(w, badRequest("bookmark must be a positive integer, as in the Sluice-Bookmark header"))
		return
	}
	db, err := a.host.Get(r.Context(), name)
	if err != nil {
		WriteError(w, err)
		return
	}
	durable, err := db.Read(r.Context(), func(sqlconn.Conn) error { return nil })
	if err != nil {
		WriteError(w, err)
		return
	}
	w.Header().Set(dbhost.BookmarkHeader, strconv.FormatUint(uint64(durable), 10))
	httpjson.Write(w, http.StatusOK, map[string]any{
		"bookmark":         strconv.FormatUint(want, 10),
		"durable":          uint64(durable) >= want,
		"durable_bookmark": strconv.FormatUint(uint64(durable), 10),
	})
}
