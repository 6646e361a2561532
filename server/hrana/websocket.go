package hrana

import (
	"context"
	"net/http"

	"github.com/sluicedb/sluice/server/hrana/ws"
)

// ServeWebSocket upgrades r to Hrana over WebSocket (server/hrana/ws) and
// serves the connection until it ends; authorize checks the credential of
// each hello. While the handler closes it answers 503.
func (h *Handler) ServeWebSocket(w http.ResponseWriter, r *http.Request, authorize ws.Authorizer) {
	if e := h.ws.Serve(w, r, authorize); e != nil {
		writeHTTPError(w, http.StatusServiceUnavailable, e)
	}
}

// CloseWebSockets closes every WebSocket connection ("going away"), rolls
// back their open transactions and refuses new ones. It returns when they
// are gone or ctx ends.
func (h *Handler) CloseWebSockets(ctx context.Context) { h.ws.Close(ctx) }
