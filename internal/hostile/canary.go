package hostile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Canary is an innocent client: it queries its own database every 5–25 ms
// (a random pause) and records each answer's latency. Dense enough that a
// five-second attack yields a few hundred answers, so its p99 is not just
// the one slowest answer. An error or a
// non-200 answer counts as a failure at the time it took.
type Canary struct {
	srv      *Server
	client   *http.Client
	min, max time.Duration

	mu       sync.Mutex
	lat      []time.Duration
	failures int
	lastErr  string
	inflight time.Time // start of the query in flight, zero between queries

	stop chan struct{}
	done chan struct{}
}

// CanaryStats summarises the canary's answers over a window.
type CanaryStats struct {
	N        int
	Failures int
	P50, P99 time.Duration
	Max      time.Duration
	LastErr  string
}

func (c CanaryStats) String() string {
	s := fmt.Sprintf("%d queries, p50 %s, p99 %s, max %s", c.N, ms(c.P50), ms(c.P99), ms(c.Max))
	if c.Failures > 0 {
		s += fmt.Sprintf(", %d failed (last: %s)", c.Failures, c.LastErr)
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// StartCanary creates the canary's database with a small table, then
// queries it in the background until Stop.
func (s *Server) StartCanary(ctx context.Context) (*Canary, error) {
	if code, body, err := s.Request(ctx, http.MethodPut, "/v1/databases/"+CanaryDatabase, AdminToken, nil); err != nil || code >= 300 && code != http.StatusConflict {
		return nil, fmt.Errorf("create the canary's database: %d %s %v", code, body, err)
	}
	for _, q := range []string{"CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 100) INSERT INTO t (v) SELECT 'canary row ' || i FROM n"} {
		if err := s.Query(ctx, CanaryToken, CanaryDatabase, q); err != nil {
			return nil, err
		}
	}
	c := &Canary{srv: s, min: 5 * time.Millisecond, max: 25 * time.Millisecond,
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}},
		stop:   make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

var canaryBody = []byte(`{"sql":"SELECT count(*), max(id), sum(length(v)) FROM t WHERE id % 7 = 3"}`)

func (c *Canary) loop() {
	defer close(c.done)
	for {
		start := time.Now()
		c.mu.Lock()
		c.inflight = start
		c.mu.Unlock()
		err := c.once()
		d := time.Since(start)
		c.mu.Lock()
		c.inflight = time.Time{}
		c.lat = append(c.lat, d)
		if err != nil {
			c.failures++
			c.lastErr = err.Error()
		}
		c.mu.Unlock()
		pause := c.min + time.Duration(rand.Int64N(int64(c.max-c.min)))
		select {
		case <-c.stop:
			return
		case <-time.After(pause):
		}
	}
}

func (c *Canary) once() error {
	req, _ := http.NewRequest(http.MethodPost, c.srv.URL+"/v1/databases/"+CanaryDatabase+"/query", bytes.NewReader(canaryBody))
	req.Header.Set("Authorization", "Bearer "+CanaryToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// Window starts a new measurement window and returns the previous one.
func (c *Canary) Window() CanaryStats {
	c.mu.Lock()
	lat, failures, lastErr := c.lat, c.failures, c.lastErr
	c.lat, c.failures, c.lastErr = nil, 0, ""
	if !c.inflight.IsZero() {
		// A query stuck behind the attack counts for as long as it waited
		// so far: a wedged server must not look quiet.
		lat = append(lat, time.Since(c.inflight))
	}
	c.mu.Unlock()
	st := CanaryStats{N: len(lat), Failures: failures, LastErr: lastErr}
	if len(lat) == 0 {
		return st
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	st.P50, st.P99, st.Max = q(0.50), q(0.99), lat[len(lat)-1]
	return st
}

// Stop ends the canary.
func (c *Canary) Stop() {
	close(c.stop)
	<-c.done
	c.client.CloseIdleConnections()
}
