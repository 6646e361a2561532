// Package storelatency puts a real bucket's latency in front of a loopback
// object store: an HTTP reverse proxy that delays each S3 request by a
// log-normal time chosen by its kind (PUT, GET, HEAD, LIST, DELETE) and may
// cap the bandwidth of each response. Benchmarks point sluice, Litestream and
// their own clients at the proxy, so every party pays the same latency.
// It imports the standard library, and internal/minioproc for Front.
package storelatency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is the class of an S3 request, which sets its latency.
type Kind string

// The request kinds a Spec gives latencies for.
const (
	Put    Kind = "put"
	Get    Kind = "get"
	Head   Kind = "head"
	List   Kind = "list"
	Delete Kind = "delete"
)

var kinds = []Kind{Put, Get, Head, List, Delete}

// DefaultSigma spreads the delays so that p99 ≈ 3 × the median (ln 3 / z₀.₉₉),
// as a real bucket's small requests are spread.
const DefaultSigma = 0.472

// Spec is the latency to add per request kind (the median of a log-normal
// distribution) and an optional cap on each response's bytes per second.
type Spec struct {
	Median    map[Kind]time.Duration
	Sigma     float64
	Bandwidth int64 // bytes per second per response; 0: none
}

// Parse reads "put=25ms,get=15ms[,head=..][,list=..][,delete=..][,sigma=0.47][,bandwidth=100MiB]".
// A kind left out takes GET's latency for reads (head, list) and PUT's for
// delete; an empty string is no added latency (the zero Spec).
func Parse(s string) (Spec, error) {
	sp := Spec{Median: map[Kind]time.Duration{}, Sigma: DefaultSigma}
	if strings.TrimSpace(s) == "" {
		return Spec{}, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Spec{}, fmt.Errorf("store latency %q: want KIND=DURATION, e.g. put=25ms,get=15ms", part)
		}
		switch k {
		case "sigma":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || f > 3 {
				return Spec{}, fmt.Errorf("store latency sigma %q: want a number from 0 to 3", v)
			}
			sp.Sigma = f
		case "bandwidth":
			n, err := parseBytes(strings.TrimSuffix(v, "/s"))
			if err != nil {
				return Spec{}, fmt.Errorf("store latency bandwidth %q: %v (e.g. 100MiB)", v, err)
			}
			sp.Bandwidth = n
		default:
			if !knownKind(Kind(k)) {
				return Spec{}, fmt.Errorf("store latency: unknown request kind %q (want put, get, head, list, delete, sigma or bandwidth)", k)
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return Spec{}, fmt.Errorf("store latency %s=%q: want a duration such as 25ms", k, v)
			}
			sp.Median[Kind(k)] = d
		}
	}
	fill := func(k, from Kind) {
		if _, ok := sp.Median[k]; !ok {
			sp.Median[k] = sp.Median[from]
		}
	}
	fill(Head, Get)
	fill(List, Get)
	fill(Delete, Put)
	return sp, nil
}

func knownKind(k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0, errors.New("want a positive size")
	}
	return int64(f * float64(mult)), nil
}

// String is the spec as Parse reads it.
func (s Spec) String() string {
	if s.Zero() {
		return "none"
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%s", k, s.Median[k]))
	}
	parts = append(parts, fmt.Sprintf("sigma=%.2f", s.Sigma))
	if s.Bandwidth > 0 {
		parts = append(parts, fmt.Sprintf("bandwidth=%.0fMiB", float64(s.Bandwidth)/(1<<20)))
	}
	return strings.Join(parts, ",")
}

// Zero tells whether the spec adds nothing.
func (s Spec) Zero() bool {
	for _, d := range s.Median {
		if d > 0 {
			return false
		}
	}
	return s.Bandwidth == 0
}

// Classify names the kind of an S3 request (path-style addressing).
func Classify(r *http.Request) Kind {
	q := r.URL.Query()
	bucketOnly := strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0
	switch r.Method {
	case http.MethodGet:
		if bucketOnly || q.Has("list-type") || q.Has("prefix") {
			return List
		}
		return Get
	case http.MethodHead:
		return Head
	case http.MethodDelete:
		return Delete
	case http.MethodPost:
		if q.Has("delete") {
			return Delete
		}
		return Put
	default:
		return Put
	}
}

// Proxy is a running latency proxy.
type Proxy struct {
	URL string // http://127.0.0.1:PORT, to use as the store's endpoint

	spec Spec
	srv  *http.Server
	ln   net.Listener

	mu    sync.Mutex
	rng   *rand.Rand
	added map[Kind][]time.Duration
}

// Start proxies to target (an http:// endpoint) on a free loopback port.
func Start(target string, spec Spec) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("store latency proxy: target %q is not an http URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), spec: spec, ln: ln,
		rng: rand.New(rand.NewPCG(1, 2)), added: map[Kind][]time.Duration{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // SigV4 signs the Host the client addressed: keep it
		},
		FlushInterval: -1,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true},
		ErrorLog:      nil,
	}
	p.srv = &http.Server{Handler: p.handler(rp)}
	go p.srv.Serve(ln)
	return p, nil
}

func (p *Proxy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := Classify(r)
		d := p.delay(kind)
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if p.spec.Bandwidth > 0 {
			w = &throttled{ResponseWriter: w, rate: p.spec.Bandwidth, start: time.Now()}
		}
		next.ServeHTTP(w, r)
	})
}

// delay draws the latency of one request and records it.
func (p *Proxy) delay(k Kind) time.Duration {
	m := p.spec.Median[k]
	if m <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := time.Duration(float64(m) * math.Exp(p.spec.Sigma*p.rng.NormFloat64()))
	p.added[k] = append(p.added[k], d)
	return d
}

// Added returns the median and p99 of the latency added to requests of kind
// k so far, and how many there were.
func (p *Proxy) Added(k Kind) (p50, p99 time.Duration, n int) {
	p.mu.Lock()
	ds := append([]time.Duration(nil), p.added[k]...)
	p.mu.Unlock()
	if len(ds) == 0 {
		return 0, 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)], len(ds)
}

// Summary is one line: requests per kind with their added p50/p99.
func (p *Proxy) Summary() string {
	var parts []string
	for _, k := range kinds {
		if p50, p99, n := p.Added(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (+%s p50, +%s p99)", k, n, p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond)))
		}
	}
	if len(parts) == 0 {
		return "no requests"
	}
	return strings.Join(parts, ", ")
}

// Close stops the proxy.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.srv.Shutdown(ctx)
}

// throttled caps a response's bytes per second by sleeping between writes.
type throttled struct {
	http.ResponseWriter
	rate    int64
	start   time.Time
	written int64
}

func (t *throttled) Write(b []byte) (int, error) {
	var n int
	for len(b) > 0 {
		chunk := b
		if len(chunk) > 64<<10 {
			chunk = chunk[:64<<10]
		}
		m, err := t.ResponseWriter.Write(chunk)
		n += m
		t.written += int64(m)
		if err != nil {
			return n, err
		}
		b = b[m:]
		due := t.start.Add(time.Duration(float64(t.written) / float64(t.rate) * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
	}
	return n, nil
}

// Flush passes flushes through, so streamed answers stream.
func (t *throttled) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

var _ io.Writer = (*throttled)(nil)
