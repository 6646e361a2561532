package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
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

// proxy sends the request to the writer and copies its answer back, all
// before deadline (the request's forward timeout, end to end: a writer that
// accepts the connection but never answers, a paused process, holds the
// client no longer than that). It returns false (nothing written, retry)
// only when the request never reached the writer, so it was certainly not
// applied there.
func (f *Forwarder) proxy(w http.ResponseWriter, r *http.Request, name string, body []byte, to lease.Record, deadline time.Time) bool {
	if !time.Now().Before(deadline) {
		return false
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	var sent atomic.Bool // any byte of the request may have reached the writer
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { sent.Store(true) },
	})
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
		if !sent.Load() || (errors.As(err, &op) && op.Op == "dial") {
			return false
		}
		if ctx.Err() != nil && r.Context().Err() == nil {
			f.cfg.WriteError(w, r, httperr.WithStatus(http.StatusGatewayTimeout, dberr.New(dberr.CodeUnavailable,
				"the database's writer "+to.URL+" did not answer within the forward timeout ("+f.cfg.Timeout.String()+
					"); the write may or may not have been applied there: retry with the same Idempotency-Key, or read to check")))
			return true
		}
		f.cfg.WriteError(w, r, httperr.WithStatus(http.StatusBadGateway, dberr.New(dberr.CodeUnavailable,
			"forwarding to the database's writer "+to.URL+" failed mid-request ("+err.Error()+"); the write may or may not have been applied")))
		return true
	}
	defer resp.Body.Close()
	if bm, err := strconv.ParseUint(resp.Header.Get(dbhost.BookmarkHeader), 10, 64); err == nil && bm > 0 &&
		resp.StatusCode/100 == 2 && f.cfg.Acknowledged != nil {
		f.cfg.Acknowledged(name, bm)
	}
	for k, vs := range resp.Header {
		if !hopHeaders[k] {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
	return true
}
