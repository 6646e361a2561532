// Package load is sluice's closed-loop HTTP load generator: N virtual users,
// each on its own keep-alive connection, send a request, wait for the whole
// answer, and send the next, for a duration or a request count, after a
// warm-up that is left out of the figures. Latencies go into an HDR histogram;
// a per-second series and failures by kind are kept beside it.
//
// To drive tens of thousands of requests per second on a couple of cores it
// writes pre-serialized HTTP/1.1 requests straight to the connection and
// parses answers with net/http's reader, reusing buffers per VU.
//
// It imports only the standard library and hdrhistogram-go; it knows nothing
// about sluice, scenarios or reports.
package load

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
)

// Request is one prepared HTTP request, serialized once and sent many times.
type Request struct {
	Method string
	URL    string
	// Write marks a request whose 2xx answer acknowledges one write, so that
	// -verify can compare acknowledged writes with what the database holds.
	Write bool
	// Check, if set, inspects a 2xx answer's body; a non-empty result turns it
	// into a failure of that kind (e.g. a Hrana pipeline answering 200 with an
	// error inside).
	Check func(body []byte) (failure string)

	addr string // host:port to dial
	raw  []byte // the whole request on the wire
}

// NewRequest serializes a request. headers are "Name: value" pairs.
func NewRequest(method, rawURL string, body []byte, headers ...string) (*Request, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("request URL %q: %w", rawURL, err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("request URL %q: only http:// is supported by the load generator", rawURL)
	}
	host := u.Host
	if u.Port() == "" {
		host += ":80"
	}
	var b bytes.Buffer
	b.WriteString(method + " " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: sluice-bench\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	if body != nil || method == "POST" || method == "PUT" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return &Request{Method: method, URL: rawURL, addr: host, raw: b.Bytes()}, nil
}

// MustRequest is NewRequest for requests built from known-good parts.
func MustRequest(method, rawURL string, body []byte, headers ...string) *Request {
	r, err := NewRequest(method, rawURL, body, headers...)
	if err != nil {
		panic(err)
	}
	return r
}
