package hrana

import (
	"net/http"
	"strconv"

	"github.com/sluicedb/sluice/internal/jsonstr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// writePipeline answers a pipeline with exactly "application/json" (see
// writeJSON) and a Content-Length, in one write.
func writePipeline(w http.ResponseWriter, resp *proto.PipelineResponse, bm dbhost.Bookmark) {
	data, err := proto.AppendPipeline(jsonstr.GetBuffer(), resp)
	if err != nil {
		writeJSON(w, http.StatusOK, resp, bm) // reports the encoding error as writeJSON does
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(data))}
	if bm > 0 {
		h.Set(dbhost.BookmarkHeader, formatBookmark(bm))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	// Written: nothing refers to the buffer any more (a keyed write stored
	// its own copy of the answer when it committed). Each statement's rows
	// are in a slice of their own size (RowsEncoder.Detach), left to the
	// collector.
	jsonstr.PutBuffer(data)
}
