package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/jsonapi"
	"github.com/sluicedb/sluice/server/metrics"
)

// Reads on an instance that does not write a database are served from its
// follower (dbhost/followers.go): the request runs against a read-only view
// with its response buffered; if it turns out to write (the view was asked
// for a write or a session) the buffer is dropped and the request is
// forwarded to the writer like any other. A read carrying a bookmark
// (Sluice-Bookmark header) first waits until the follower has applied it.
// Hrana requests continuing a stream (a baton) always go to the writer,
// which holds the stream; a local read that would leave a stream open is
// forwarded too.

// serveFromReplica tries to answer r from name's follower. It reports
// whether it answered, and returns the request body it read (for the
// forward). Errors other than a missed bookmark leave the request to the
// writer.
func (s *Server) serveFromReplica(w http.ResponseWriter, r *http.Request, name string, next http.HandlerFunc) (bool, []byte) {
	if r.Method != http.MethodPost || r.Header.Get(forwardedHeader) != "" || strings.HasSuffix(r.URL.Path, "/cursor") {
		return false, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, r, dberr.New(dberr.CodeBadRequest, "read request body: "+err.Error()))
		return true, nil
	}
	hrana := !strings.HasPrefix(r.URL.Path, "/v1/databases/")
	if hrana && hasBaton(body) {
		return false, body
	}
	var bookmark uint64
	if v := r.Header.Get(jsonapi.BookmarkHeader); v != "" {
		if bookmark, err = strconv.ParseUint(v, 10, 64); err != nil {
			writeError(w, r, dberr.New(dberr.CodeBadRequest, jsonapi.BookmarkHeader+" "+strconv.Quote(v)+" is not a TXID (a decimal number from a previous response)"))
			return true, body
		}
	}
	if hrana {
		// Hrana carries the bookmark in the statement or batch itself.
		bookmark = max(bookmark, hranaReplicationIndex(body))
	}
	view, err := s.host.ReadReplica(r.Context(), name, dbhost.Bookmark(bookmark))
	if err != nil {
		if bookmark > 0 && errors.Is(err, dberr.ErrLagging) {
			writeError(w, r, err)
			return true, body
		}
		return false, body
	}
	buf := &bufferedResponse{header: http.Header{}}
	req := r.WithContext(dbhost.WithReplicaView(r.Context(), view))
	req.Body = io.NopCloser(bytes.NewReader(body))
	next(buf, req)
	if view.NeedsLeader() || (hrana && hasBaton(buf.body.Bytes())) {
		return false, body
	}
	for k, vs := range buf.header {
		w.Header()[k] = vs
	}
	if w.Header().Get(jsonapi.BookmarkHeader) == "" {
		w.Header().Set(jsonapi.BookmarkHeader, strconv.FormatUint(uint64(view.Bookmark()), 10))
	}
	w.Header().Set("Sluice-Served-By", "replica")
	if buf.status == 0 {
		buf.status = http.StatusOK
	}
	w.WriteHeader(buf.status)
	w.Write(buf.body.Bytes())
	return true, body
}

// hranaReplicationIndex is the highest replication_index a Hrana request
// carries (Hrana puts it on each stmt and batch, as a decimal string), or 0.
func hranaReplicationIndex(body []byte) uint64 {
	if !bytes.Contains(body, []byte(`"replication_index"`)) {
		return 0
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	var most uint64
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "replication_index" {
					var n uint64
					switch idx := e.(type) {
					case string:
						n, _ = strconv.ParseUint(idx, 10, 64)
					case float64:
						n = uint64(idx)
					}
					most = max(most, n)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return most
}

// hasBaton reports whether a Hrana request or response names a stream.
func hasBaton(b []byte) bool {
	var v struct {
		Baton *string `json:"baton"`
	}
	return json.Unmarshal(b, &v) == nil && v.Baton != nil && *v.Baton != ""
}

type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// registerFollowerMetrics exports every follower's lag.
func (s *Server) registerFollowerMetrics() {
	stat := func(f func(dbhost.FollowerStats) float64) func() []metrics.Sample {
		return func() []metrics.Sample {
			if s.host == nil {
				return nil
			}
			var out []metrics.Sample
			for _, st := range s.host.FollowerStats() {
				out = append(out, metrics.Sample{Labels: []string{st.Name}, Value: f(st)})
			}
			return out
		}
	}
	db := []string{"db"}
	s.metrics.reg.GaugeFunc("sluice_follower_txid", "TXID the follower (read replica) has applied.", db,
		stat(func(st dbhost.FollowerStats) float64 { return float64(st.TXID) }))
	s.metrics.reg.GaugeFunc("sluice_follower_lag_txids", "TXIDs known to exist in the replica (from bookmarks and checks) that the follower has not applied.", db,
		stat(func(st dbhost.FollowerStats) float64 { return float64(st.LagTXIDs) }))
	s.metrics.reg.GaugeFunc("sluice_follower_lag_seconds", "Delay between the writer's upload and the follower's apply of the last file.", db,
		stat(func(st dbhost.FollowerStats) float64 { return st.Lag.Seconds() }))
	s.metrics.reg.GaugeFunc("sluice_follower_behind_seconds", "0 when caught up; else the age of the last applied file.", db,
		stat(func(st dbhost.FollowerStats) float64 { return st.Behind.Seconds() }))
}
