package load

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A server that counts what it receives, answers 204, and fails every 10th request.
func countingServer(t *testing.T, served *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := served.Add(1)
		if r.URL.Path == "/flaky" && n%10 == 0 {
			http.Error(w, "boom", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/body" {
			io.WriteString(w, `{"results":[{"type":"error"}]}`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRequestsModeCountsEveryAnswer(t *testing.T) {
	var served atomic.Int64
	srv := countingServer(t, &served)
	req := MustRequest("POST", srv.URL+"/flaky", []byte(`{"x":1}`), "Content-Type: application/json")
	req.Write = true
	res, err := Run(context.Background(), Config{VUs: 8, Requests: 2000, Next: func(int, uint64) *Request { return req }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 2000 || served.Load() != 2000 {
		t.Fatalf("measured %d requests, server saw %d; want 2000 each", res.Requests, served.Load())
	}
	if got := res.Failures["http 503"]; got != 200 || res.OK != 1800 {
		t.Fatalf("failures %v ok %d; want 200 × http 503 and 1800 ok", res.Failures, res.OK)
	}
	if res.AckedWrites != 1800 || res.UnknownWrites != 200 {
		t.Fatalf("acked %d unknown %d; want 1800 and 200 (a 503 may have been applied)", res.AckedWrites, res.UnknownWrites)
	}
	if res.Latency.TotalCount() != 2000 || res.Latency.Min() < 1 {
		t.Fatalf("histogram holds %d values (min %d); want 2000", res.Latency.TotalCount(), res.Latency.Min())
	}
}

func TestWarmupIsLeftOutOfTheFigures(t *testing.T) {
	var served atomic.Int64
	srv := countingServer(t, &served)
	req := MustRequest("POST", srv.URL+"/", nil)
	req.Write = true
	var seconds atomic.Int64
	res, err := Run(context.Background(), Config{
		VUs: 4, Duration: 1500 * time.Millisecond, Warmup: 500 * time.Millisecond,
		Next:     func(int, uint64) *Request { return req },
		OnSecond: func(Second) { seconds.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.WarmupRequests == 0 || res.Requests == 0 {
		t.Fatalf("warm-up %d, measured %d: want both > 0", res.WarmupRequests, res.Requests)
	}
	if res.Requests+res.WarmupRequests != served.Load() || res.AckedWrites != served.Load() {
		t.Fatalf("measured %d + warm-up %d, acked %d; server saw %d", res.Requests, res.WarmupRequests, res.AckedWrites, served.Load())
	}
	if res.Latency.TotalCount() != res.Requests {
		t.Fatalf("histogram has %d values, measured requests %d", res.Latency.TotalCount(), res.Requests)
	}
	if res.Elapsed < 1500*time.Millisecond || res.Elapsed > 3*time.Second {
		t.Fatalf("measured window %s, want about 1.5 s", res.Elapsed)
	}
	if seconds.Load() != 1 || len(res.Series) != 2 {
		t.Fatalf("OnSecond called %d times, series has %d points; want 1 full second + the tail", seconds.Load(), len(res.Series))
	}
	var sum int64
	for _, s := range res.Series {
		sum += s.Requests
	}
	if sum != res.Requests {
		t.Fatalf("series sums to %d, measured %d", sum, res.Requests)
	}
}

func TestCheckTurnsA200IntoAFailure(t *testing.T) {
	var served atomic.Int64
	srv := countingServer(t, &served)
	req := MustRequest("POST", srv.URL+"/body", nil)
	req.Write = true
	req.Check = func(b []byte) string {
		if string(b) == `{"results":[{"type":"error"}]}` {
			return "hrana error"
		}
		return ""
	}
	res, err := Run(context.Background(), Config{VUs: 2, Requests: 50, Next: func(int, uint64) *Request { return req }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failures["hrana error"] != 50 || res.RejectedWrites != 50 || res.AckedWrites != 0 {
		t.Fatalf("failures %v rejected %d acked %d; want 50 hrana errors, all rejected", res.Failures, res.RejectedWrites, res.AckedWrites)
	}
}

func TestConnectionFailuresAndTimeouts(t *testing.T) {
	// A closed port: connect errors, nothing sent.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	req := MustRequest("POST", "http://"+addr+"/", nil)
	req.Write = true
	res, err := Run(context.Background(), Config{VUs: 2, Requests: 4, Next: func(int, uint64) *Request { return req }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failures[FailConnect] != 4 || res.RejectedWrites != 4 || res.UnknownWrites != 0 {
		t.Fatalf("failures %v rejected %d unknown %d; want 4 connect errors, never sent", res.Failures, res.RejectedWrites, res.UnknownWrites)
	}

	// A server that never answers: timeouts, outcome unknown.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	defer hang.CloseClientConnections()
	req = MustRequest("POST", hang.URL+"/", nil)
	req.Write = true
	res, err = Run(context.Background(), Config{VUs: 2, Requests: 2, Timeout: 200 * time.Millisecond, Next: func(int, uint64) *Request { return req }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failures[FailTimeout] != 2 || res.UnknownWrites != 2 {
		t.Fatalf("failures %v unknown %d; want 2 timeouts of unknown outcome", res.Failures, res.UnknownWrites)
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := Run(context.Background(), Config{VUs: 1}); err == nil {
		t.Fatal("want an error without Next and without a duration")
	}
	if _, err := NewRequest("GET", "https://example.com/", nil); err == nil {
		t.Fatal("want an error for https (the generator speaks plain HTTP/1.1)")
	}
}
