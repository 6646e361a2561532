package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// RefusedNames: a read-only token scoped to one database asks for n other
// names (all refused 403) from 8 connections, then /metrics is scraped
// whole. It fails when the scrape holds a series for a name that does not
// exist, or takes longer than 2 s. Eight clients: as many as keep a
// 2-core server's CPU busy without it being a plain CPU flood.
func RefusedNames(n int) Attack { return RefusedNamesOver(n, 8) }

// RefusedNamesOver is RefusedNames sent over conns connections: what the
// attack tests is how many names the server is made to remember, not the
// request rate, which on a machine the attacker shares only measures the CPU.
func RefusedNamesOver(n, conns int) Attack {
	return Attack{Name: fmt.Sprintf("%d refused names + /metrics", n), Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		var next, forbidden, other atomic.Int64
		var wg sync.WaitGroup
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
		defer client.CloseIdleConnections()
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := next.Add(1)
					if i > int64(n) {
						return
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/v1/databases/spam-"+strconv.FormatInt(i, 10), nil)
					req.Header.Set("Authorization", "Bearer "+ScopedReadOnlyToken)
					resp, err := client.Do(req)
					if err != nil {
						other.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusForbidden {
						forbidden.Add(1)
					} else {
						other.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		rec.Notef("%d refused 403, %d other answers", forbidden.Load(), other.Load())
		if other.Load() > 0 {
			return fmt.Errorf("%d of %d requests were not refused with 403", other.Load(), n)
		}
		start := time.Now()
		size, spam, err := scrape(ctx, s)
		took := time.Since(start)
		if err != nil {
			return err
		}
		rec.Notef("/metrics: %d bytes in %s, %d lines naming a refused database", size, took.Round(time.Millisecond), spam)
		if spam > 0 {
			return fmt.Errorf("/metrics holds %d series for databases that do not exist", spam)
		}
		if took > 2*time.Second {
			return fmt.Errorf("/metrics took %s", took)
		}
		return nil
	}}
}

// scrape reads /metrics whole with the metrics token: its size and the
// lines naming a spam- database.
func scrape(ctx context.Context, s *Server) (size int64, spam int, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+MetricsToken)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		size += int64(len(sc.Bytes()) + 1)
		if strings.Contains(sc.Text(), `db="spam-`) {
			spam++
		}
	}
	return size, spam, sc.Err()
}

// dialSmall connects with a small receive buffer, so that a peer writing
// to a socket nobody reads blocks after a few KiB rather than megabytes.
func dialSmall(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	return d.DialContext(ctx, "tcp", addr)
}

// NonReadingMetrics: conns sockets request /metrics and never read, held
// for hold; the canary keeps querying meanwhile.
func NonReadingMetrics(conns int, hold time.Duration) Attack {
	return Attack{Name: fmt.Sprintf("%d non-reading /metrics sockets", conns), Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for range conns {
			c, err := dialSmall(ctx, s.Addr)
			if err != nil {
				return err
			}
			open = append(open, c)
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", s.Addr, MetricsToken)
		}
		sleep(ctx, hold)
		return nil
	}}
}

// LargeAnswerQuery is a read of rows rows of about 200 bytes each.
func LargeAnswerQuery(rows int) string {
	return fmt.Sprintf("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %d) "+
		"SELECT i, printf('%%0180d', i) AS pad FROM n", rows)
}

// NonReadingQuery: clients sockets post a query of rows rows and never
// read the answer, held for hold; then one client that reads gets the same
// query, which must be answered whole or refused naming
// limits.max-response-bytes.
func NonReadingQuery(clients, rows int, hold time.Duration) Attack {
	return Attack{Name: fmt.Sprintf("%d non-reading clients of a %d-row query", clients, rows), Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		body, _ := json.Marshal(map[string]string{"sql": LargeAnswerQuery(rows)})
		return nonReading(ctx, s, rec, clients, hold, "/v1/databases/large/query", body, false)
	}}
}

// NonReadingHrana is NonReadingQuery over Hrana: path is /v3/pipeline
// (one execute) or /v3/cursor (a one-step batch).
func NonReadingHrana(clients, rows int, hold time.Duration, path string) Attack {
	return Attack{Name: fmt.Sprintf("%d non-reading clients of a %d-row %s", clients, rows, path), Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		stmt := map[string]any{"sql": LargeAnswerQuery(rows), "want_rows": true}
		var req any = map[string]any{"baton": nil, "requests": []any{map[string]any{"type": "execute", "stmt": stmt}, map[string]any{"type": "close"}}}
		if strings.HasSuffix(path, "cursor") {
			req = map[string]any{"baton": nil, "batch": map[string]any{"steps": []any{map[string]any{"stmt": stmt}}}}
		}
		body, _ := json.Marshal(req)
		return nonReading(ctx, s, rec, clients, hold, "/db/large"+path, body, true)
	}}
}

// nonReading creates the database "large", has clients sockets post body to
// path and never read, holds them for hold, then sends it once as a client
// that reads: the answer must be whole or refused naming
// limits.max-response-bytes (hrana: inside the answer, as a statement's
// error or a cursor's step_error).
func nonReading(ctx context.Context, s *Server, rec *Recorder, clients int, hold time.Duration, path string, body []byte, hrana bool) error {
	if code, answer, err := s.Request(ctx, http.MethodPut, "/v1/databases/large", AttackerToken, nil); err != nil || code >= 300 && code != http.StatusConflict {
		return fmt.Errorf("create: %d %s %v", code, answer, err)
	}
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range clients {
		c, err := dialSmall(ctx, s.Addr)
		if err != nil {
			return err
		}
		open = append(open, c)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			path, s.Addr, AttackerToken, len(body), body)
	}
	sleep(ctx, hold)
	code, answer, err := s.Request(ctx, http.MethodPost, path, AttackerToken, body)
	if err != nil {
		return err
	}
	switch {
	case code != http.StatusOK:
		rec.Refused(code, answer, "limits.max-response-bytes")
	case hrana && strings.Contains(answer, `"error"`):
		// Hrana refuses the statement, inside the answer, as clients parse it.
		rec.RefusedInAnswer(answer, "limits.max-response-bytes")
	default:
		rec.Notef("a reading client got the whole answer")
	}
	return nil
}

// SlowBodies: conns connections each send a request whose chunked body
// never ends (one byte a second), half without credentials. Those without
// must be refused 401 at once; those with, once the body has taken longer
// than the server's body read timeout (408 naming limits.body-read-timeout).
// The attack ends when every connection was answered or closed, or after
// limit.
func SlowBodies(conns int, limit time.Duration) Attack {
	return Attack{Name: fmt.Sprintf("%d slow-body connections", conns), Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		var wg sync.WaitGroup
		var unauthFast atomic.Int64
		var maxUnauth, maxAuth atomic.Int64
		errc := make(chan error, conns)
		for i := range conns {
			authed := i%2 == 1
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
				if err != nil {
					errc <- err
					return
				}
				defer c.Close()
				start := time.Now()
				head := fmt.Sprintf("POST /v1/databases/slow/query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n", s.Addr)
				if authed {
					head += "Authorization: Bearer " + AttackerToken + "\r\n"
				}
				if _, err := io.WriteString(c, head+"\r\n1\r\n{\r\n"); err != nil {
					errc <- err
					return
				}
				got := make(chan struct{})
				var code int
				var body string
				go func() {
					defer close(got)
					resp, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						return
					}
					code = resp.StatusCode
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
					body = string(b)
				}()
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
			loop:
				for {
					select {
					case <-got:
						break loop
					case <-ctx.Done():
						rec.Unclear("a slow body (authenticated: %v) was still open after %s", authed, limit)
						return
					case <-tick.C:
						c.Write([]byte("1\r\n \r\n")) // an error here: the server closed; the reader says how
					}
				}
				took := time.Since(start)
				if authed {
					storeMax(&maxAuth, int64(took))
					rec.Refused(code, body, "limits.body-read-timeout")
					return
				}
				storeMax(&maxUnauth, int64(took))
				if code != http.StatusUnauthorized {
					rec.Unclear("an unauthenticated slow body got %d %q after %s, not 401", code, body, took)
				} else if took < 2*time.Second {
					unauthFast.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			return err
		}
		rec.Notef("unauthenticated: %d of %d refused within 2 s (slowest %s); authenticated: slowest answered after %s",
			unauthFast.Load(), (conns+1)/2, time.Duration(maxUnauth.Load()).Round(time.Millisecond), time.Duration(maxAuth.Load()).Round(time.Millisecond))
		if int(unauthFast.Load()) != (conns+1)/2 {
			return fmt.Errorf("%d of %d unauthenticated slow bodies were refused within 2 s", unauthFast.Load(), (conns+1)/2)
		}
		return nil
	}}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// FutureJWT: a JWT issued ten years from now with a one-hour life, and one
// issued now valid for a year, must both be refused 401.
func FutureJWT() Attack {
	return Attack{Name: "future-iat JWT", Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		now := time.Now()
		future := now.AddDate(10, 0, 0)
		for _, tc := range []struct {
			claims map[string]any
			limit  string
		}{
			{map[string]any{"iat": future.Unix(), "exp": future.Add(time.Hour).Unix(), "a": "rw"}, "iat"},
			{map[string]any{"iat": now.Unix(), "exp": now.AddDate(1, 0, 0).Unix(), "a": "rw"}, "jwt-max-lifetime"},
			{map[string]any{"exp": now.AddDate(1, 0, 0).Unix(), "a": "rw"}, "jwt-max-lifetime"},
		} {
			code, body, err := s.Request(ctx, http.MethodGet, "/v1/databases", s.JWT(tc.claims), nil)
			if err != nil {
				return err
			}
			rec.Refused(code, body, tc.limit)
		}
		return nil
	}}
}

// ReadOnlyPipeline: a read-only token's Hrana pipeline on a database that
// does not exist (the default one, then a named one) must be refused and
// must create nothing.
func ReadOnlyPipeline() Attack {
	return Attack{Name: "read-only pipeline on a missing database", Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		pipe := []byte(`{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"close"}]}`)
		for _, path := range []string{"/v3/pipeline", "/v2/pipeline", "/db/ro-missing/v3/pipeline"} {
			code, body, err := s.Request(ctx, http.MethodPost, path, ReadOnlyToken, pipe)
			if err != nil {
				return err
			}
			rec.Refused(code, body, "read-only")
		}
		code, body, err := s.Request(ctx, http.MethodGet, "/v1/databases", AdminToken, nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("list databases: %d %s", code, body)
		}
		if strings.Contains(body, `"default"`) || strings.Contains(body, `"ro-missing"`) {
			return fmt.Errorf("a read-only token created a database: %s", body)
		}
		return nil
	}}
}

// DatabasesPerToken: one token creates databases until refused; it must be
// refused (naming limits.max-databases-per-token) after at most limit, and
// another token must still create one. tries bounds the attempts.
func DatabasesPerToken(limit, tries int) Attack {
	return Attack{Name: fmt.Sprintf("databases per token (limit %d)", limit), Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		created := 0
		for i := range tries {
			code, body, err := s.Request(ctx, http.MethodPut, fmt.Sprintf("/v1/databases/many-%d", i), AttackerToken, nil)
			if err != nil {
				return err
			}
			if code < 300 {
				created++
				continue
			}
			rec.Refused(code, body, "limits.max-databases-per-token")
			if i+1 < tries {
				// one more, to see it stays refused
				code, body, err = s.Request(ctx, http.MethodPut, fmt.Sprintf("/v1/databases/many-%d", i+1), AttackerToken, nil)
				if err != nil {
					return err
				}
				rec.Refused(code, body, "limits.max-databases-per-token")
			}
			break
		}
		rec.Notef("the attacker's token created %d databases before it was refused", created)
		if created > limit {
			return fmt.Errorf("the token created %d databases, over its limit of %d", created, limit)
		}
		if code, body, err := s.Request(ctx, http.MethodPut, "/v1/databases/another-tenant", AdminToken, nil); err != nil || code >= 300 {
			return fmt.Errorf("another token could not create a database: %d %s %v", code, body, err)
		}
		// Give them back: deleting frees the quota.
		for i := range created {
			s.Request(ctx, http.MethodDelete, fmt.Sprintf("/v1/databases/many-%d", i), AttackerToken, nil)
		}
		code, body, err := s.Request(ctx, http.MethodPut, "/v1/databases/many-again", AttackerToken, nil)
		if err != nil || code >= 300 {
			return fmt.Errorf("after deleting its databases the token could not create one: %d %s %v", code, body, err)
		}
		return nil
	}}
}

// UnauthenticatedReady: /ready without credentials must not name the
// replica.
func UnauthenticatedReady(replicaHint string) Attack {
	return Attack{Name: "unauthenticated /ready", Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		code, body, err := s.Request(ctx, http.MethodGet, "/ready", "", nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/ready: %d %s", code, body)
		}
		if strings.Contains(body, replicaHint) || strings.Contains(body, "file://") {
			return fmt.Errorf("unauthenticated /ready shows the replica: %s", body)
		}
		return nil
	}}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Idle is no attack: the canary alone for d, the machine's own noise
// floor to read the other rows against.
func Idle(d time.Duration) Attack {
	return Attack{Name: "no attack (control)", Run: func(ctx context.Context, s *Server, rec *Recorder) error {
		sleep(ctx, d)
		return nil
	}}
}
