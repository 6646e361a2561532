// Package hostile runs "hostile neighbours" attacks against a real `sluice
// serve` process while a canary client queries another database, and judges
// whether the attacker stayed its own problem: the canary's latency, the
// server's memory, descriptors and goroutines before, during and after each
// attack, and whether every refused request named the limit it hit.
//
// The e2e tests run it with small counts (make test); sluice-bench hostile
// runs it with large ones. It imports only the standard library.
package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The tokens every hostile server knows (config tokens:), by role.
const (
	AdminToken    = "hostile-admin-token-rw"    // read-write, every database
	CanaryToken   = "hostile-canary-token-rw"   // read-write, the canary's database only
	AttackerToken = "hostile-attacker-token-rw" // read-write, every database
	ReadOnlyToken = "hostile-attacker-token-ro" // read-only, every database
	// ScopedReadOnlyToken may read only the database ScopedDatabase.
	ScopedReadOnlyToken = "hostile-attacker-token-ro-one"
	MetricsToken        = "hostile-metrics-token"
	ScopedDatabase      = "victim"
	CanaryDatabase      = "canary"
)

// Options start a server.
type Options struct {
	Binary string   // the sluice binary
	Dir    string   // work directory (data, replica, config, log)
	Args   []string // extra serve flags, e.g. -max-open-databases 12
	// Config is appended to the generated YAML config (top-level keys
	// other than tokens, metrics-token and jwt-public-key).
	Config string
	Env    []string
}

// Server is a running `sluice serve` with the hostile tokens and a JWT key.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Addr string // 127.0.0.1:PORT
	PID  int

	jwtKey ed25519.PrivateKey
	cmd    *exec.Cmd
	done   chan error
	out    *lockedBuffer
	admin  *http.Client
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start starts `sluice serve` with a file replica under o.Dir and waits
// until it answers /health.
func Start(ctx context.Context, o Options) (*Server, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`metrics-token: %s
jwt-public-key: %s
tokens:
  - {token: %s, access: rw}
  - {token: %s, access: rw, databases: [%s]}
  - {token: %s, access: rw}
  - {token: %s, access: ro}
  - {token: %s, access: ro, databases: [%s]}
%s
`, MetricsToken, base64.RawURLEncoding.EncodeToString(pub), AdminToken, CanaryToken, CanaryDatabase,
		AttackerToken, ReadOnlyToken, ScopedReadOnlyToken, ScopedDatabase, o.Config)
	cfgPath := filepath.Join(o.Dir, "hostile.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	// Databases an attack opened close after 5 s idle, so that descriptors
	// and goroutines can be judged back at their baseline soon after.
	args := append([]string{"serve", "-addr", addr, "-data", filepath.Join(o.Dir, "data"),
		"-replica", "file://" + filepath.Join(o.Dir, "replica"), "-config", cfgPath, "-database-idle-timeout", "5s"}, o.Args...)
	cmd := exec.Command(o.Binary, args...)
	cmd.Env = append(os.Environ(), o.Env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, Addr: addr, PID: cmd.Process.Pid, jwtKey: priv, cmd: cmd,
		done: make(chan error, 1), out: out, admin: &http.Client{Timeout: 30 * time.Second}}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := s.admin.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("sluice serve exited before answering: %v\n%s", err, out.String())
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("sluice serve did not answer /health within 60s\n%s", out.String())
		}
	}
}

// Stop sends SIGTERM and waits up to a minute (then kills).
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.New("sluice serve did not stop within 60s of SIGTERM")
	}
}

// Log is what the server printed so far.
func (s *Server) Log() string { return s.out.String() }

// JWT signs claims (iat, exp, a, id ...) with the server's trusted key.
func (s *Server) JWT(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	head := enc(map[string]string{"alg": "EdDSA", "typ": "JWT"}) + "." + enc(claims)
	return head + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.jwtKey, []byte(head)))
}

// Request sends one request with token (may be "") and returns the status
// and up to 64 KiB of the body.
func (s *Server) Request(ctx context.Context, method, path, token string, body []byte) (int, string, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.admin.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, string(b), nil
}

// Query runs one JSON API statement on db and fails unless it answers 200.
func (s *Server) Query(ctx context.Context, token, db, sql string) error {
	b, _ := json.Marshal(map[string]string{"sql": sql})
	code, body, err := s.Request(ctx, http.MethodPost, "/v1/databases/"+db+"/query", token, b)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s on %s: %d %s", sql, db, code, strings.TrimSpace(body))
	}
	return nil
}

// Resources are the server's costs at one moment.
type Resources struct {
	RSS        int64 // bytes, from /proc
	FDs        int   // open descriptors, from /proc
	Threads    int   // OS threads, from /proc
	Goroutines int   // from /metrics (sluice_go_goroutines); -1 if not exported
}

func (r Resources) String() string {
	return fmt.Sprintf("RSS %s, %d descriptors, %d goroutines, %d threads", MiB(r.RSS), r.FDs, r.Goroutines, r.Threads)
}

// MiB formats bytes as mebibytes.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// ProcResources reads RSS, descriptors and threads from /proc (no request
// to the server, so it works while the server is wedged).
func (s *Server) ProcResources() Resources {
	r := Resources{Goroutines: -1}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				r.RSS = kb << 10
			}
			if len(f) >= 2 && f[0] == "Threads:" {
				r.Threads, _ = strconv.Atoi(f[1])
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.PID)); err == nil {
		r.FDs = len(ents)
	}
	return r
}

// Resources is ProcResources plus the goroutine count from /metrics.
func (s *Server) Resources(ctx context.Context) Resources {
	r := s.ProcResources()
	r.Goroutines = s.Goroutines(ctx)
	return r
}

// Goroutines reads sluice_go_goroutines from /metrics (-1 when absent or
// /metrics does not answer within 10 s).
func (s *Server) Goroutines(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+MetricsToken)
	resp, err := s.admin.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "sluice_go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				return int(n)
			}
		}
	}
	return -1
}
