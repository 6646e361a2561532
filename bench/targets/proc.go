// Package targets starts and stops the servers the benchmarks load: sluice
// serve (sync, async, no replica), the peer app on SQLite with Litestream
// beside it, on MariaDB (a private mariadbd on a loopback port) or on a file,
// and the trivial "ceiling" handler. Each runs as its own process, so the
// load generator never shares a Go runtime with the server it measures.
//
// It imports internal/minioproc and the standard library; it never imports
// mattn/go-sqlite3 (the peer app is a separate binary).
package targets

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process whose output is kept (the last 64 KiB) for errors.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	err  error
}

type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 64<<10 {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-32<<10:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Start runs bin with args; env is added to this process's environment
// (entries named in unset are removed first).
func Start(name string, env, unset []string, bin string, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(withoutEnv(os.Environ(), unset...), env...)
	out := &tailBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// The child dies with the bench, even on a crash of the bench itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Proc{Name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Output is the process's recent output.
func (p *Proc) Output() string { return p.out.String() }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to end (SIGTERM), killing it after grace.
func (p *Proc) Stop(grace time.Duration) error {
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s and was killed", p.Name, grace)
	}
}

// waitHTTP polls url until it answers 2xx, the process exits, or timeout.
func waitHTTP(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
		}
		if p.Exited() {
			return fmt.Errorf("%s exited during start-up: %v\n%s", p.Name, p.err, p.Output())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %s\n%s", p.Name, url, timeout, p.Output())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitLine waits until the process prints a line starting with prefix and
// returns the rest of it.
func waitLine(ctx context.Context, p *Proc, prefix string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		sc := bufio.NewScanner(strings.NewReader(p.Output()))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
				return strings.TrimSpace(rest), nil
			}
		}
		if p.Exited() {
			return "", fmt.Errorf("%s exited during start-up: %v\n%s", p.Name, p.err, p.Output())
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s printed no %q line within %s\n%s", p.Name, prefix, timeout, p.Output())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// run runs a command to completion and returns its combined output.
func run(ctx context.Context, env, unset []string, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(withoutEnv(os.Environ(), unset...), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

var errNoTool = errors.New("not installed")
