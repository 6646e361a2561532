package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
)

// The proxy to a database's writer: the request goes to the URL the lease
// advertises with its headers (auth) and body intact, and the writer's
// answer (with its bookmark) comes back as it is.

var writerClient = &http.Client{Transport: &http.Transport{
	Proxy:               nil, // instances talk directly
	DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     30 * time.Second,
}}

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true}

// proxy sends the request to the writer and copies its answer back. It
// returns false (nothing written, retry) only when the writer could not be
// reached at all, so the request was certainly not applied there.
func (f *Forwarder) proxy(w http.ResponseWriter, r *http.Request, body []byte, to lease.Record) bool {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, to.URL+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return false
	}
	for k, vs := range r.Header {
		if !hopHeaders[k] {
			req.Header[k] = vs
		}
	}
	req.Header.Set(HeaderForwardedBy, f.self)
	resp, err := writerClient.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false
		}
		f.cfg.WriteError(w, r, httperr.WithStatus(http.StatusBadGateway, dberr.New(dberr.CodeUnavailable,
			"forwarding to the database's writer "+to.URL+" failed mid-request ("+err.Error()+"); the write may or may not have been applied")))
		return true
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
	return true
}
