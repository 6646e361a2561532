package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/httperr"
)

// One writer per database: each instance writes a database only while it
// holds the database's lease in the bucket (dbhost/leases.go). A request for
// a database another instance holds is forwarded to the holder's advertised
// URL, headers (auth) and body intact, and the holder's answer (with its
// bookmark) is passed back. With no reachable holder the request waits for
// the lease (this instance takes it once it is released or expires) up to
// LeaseConfig.ForwardTimeout, then gets a retryable 503.

// LeaseConfig configures leases (on unless Disabled).
type LeaseConfig struct {
	// Enabled turns on multi-instance mode. Off by default: the holder renews
	// its lease (one conditional PUT every TTL/3), which a single instance
	// does not need and which would break "idle costs nothing".
	Enabled        bool     `yaml:"enabled"`
	TTL            Duration `yaml:"ttl"`             // default 10s
	Advertise      string   `yaml:"advertise"`       // URL other instances forward to; default http://<listen address>
	ForwardTimeout Duration `yaml:"forward-timeout"` // default 10s
	// Follow runs a read-only replica: it never takes a lease, serves reads
	// from followers and forwards everything else to the lease holder.
	Follow       bool     `yaml:"follow"`
	PollInterval Duration `yaml:"poll-interval"` // follower poll, default 200ms
	BookmarkWait Duration `yaml:"bookmark-wait"` // a read's wait for its bookmark, default 5s
}

// forwardedHeader marks a forwarded request: it is never forwarded again
// (two instances that each believe the other leads must not loop).
const forwardedHeader = "Sluice-Forwarded-By"

func leaseOptions(cfg LeaseConfig, logger *slog.Logger) *lease.Options {
	if !cfg.Enabled || cfg.Follow {
		return nil
	}
	return &lease.Options{Holder: lease.NewHolderID(), URL: cfg.Advertise, TTL: time.Duration(cfg.TTL), Logger: logger}
}

// advertise sets the URL written into this instance's leases.
func (s *Server) advertise(ln net.Listener) {
	url := s.cfg.Lease.Advertise
	if url == "" {
		scheme := "http://"
		if s.cert != nil {
			scheme = "https://"
		}
		url = scheme + ln.Addr().String()
	}
	s.advertiseURL = strings.TrimRight(url, "/")
	s.host.SetAdvertiseURL(s.advertiseURL)
}

var forwardClient = &http.Client{Transport: &http.Transport{
	Proxy:               nil, // instances talk directly
	DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     30 * time.Second,
}}

// leaderOnly runs next here if this instance holds (or can take) the
// database's lease, and forwards the request to the holder otherwise.
func (s *Server) leaderOnly(next http.HandlerFunc) http.HandlerFunc {
	if !s.cfg.Lease.Enabled && !s.cfg.Lease.Follow {
		return next
	}
	timeout := time.Duration(s.cfg.Lease.ForwardTimeout)
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.PathValue("name") == "" { // Hrana version probes
			next(w, r)
			return
		}
		name := r.PathValue("name")
		if name == "" {
			name = hranaDatabaseName(r)
		}
		if dbhost.ValidateName(name) != nil {
			next(w, r)
			return
		}
		deadline := time.Now().Add(timeout)
		if !s.handoff.enterLocal() {
			s.forwardReleased(w, r, name, deadline)
			return
		}
		defer s.handoff.leaveLocal()
		var body []byte
		for {
			_, err := s.host.Get(r.Context(), name)
			var nl *dbhost.NotLeaderError
			if !errors.As(err, &nl) {
				if body != nil {
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				next(w, r) // here, or an error the handler reports
				return
			}
			if r.Header.Get(forwardedHeader) != "" {
				writeError(w, r, err)
				return
			}
			if body == nil {
				served, b := s.serveFromReplica(w, r, name, next)
				if served {
					return
				}
				body = b
			}
			rec := nl.Leader
			if rec.URL != "" && rec.URL != s.advertiseURL && !rec.Expired(time.Now()) {
				if body == nil {
					b, rerr := io.ReadAll(r.Body)
					if rerr != nil {
						writeError(w, r, dberr.New(dberr.CodeBadRequest, "read request body: "+rerr.Error()))
						return
					}
					body = b
				}
				if s.forward(w, r, body, rec) {
					return
				}
			}
			if time.Now().After(deadline) {
				writeError(w, r, err)
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true}

// forward sends the request to the holder and copies its answer back.
// It returns false (nothing written, retry) only when the holder could not
// be reached at all, so the request was certainly not applied there.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte, to lease.Record) bool {
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
	req.Header.Set(forwardedHeader, s.advertiseURL)
	resp, err := forwardClient.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false
		}
		// 502, not UNAVAILABLE's 503: the write may have been applied.
		writeError(w, r, httperr.WithStatus(http.StatusBadGateway, dberr.New(dberr.CodeUnavailable,
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
