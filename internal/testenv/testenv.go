// Package testenv starts the real services tests run against — one MinIO and
// one Azurite per test process — and hands out free ports, buckets and
// containers. It is imported only by tests.
//
// Call Cleanup from TestMain to stop the servers and remove their data; if a
// test binary exits without it, the servers still die with it (Pdeathsig).
//
// It imports the standard library and internal/minioproc (which starts MinIO).
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/minioproc"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() int {
	port, err := minioproc.FreePort()
	if err != nil {
		panic(fmt.Sprintf("testenv: no free port on 127.0.0.1: %v", err))
	}
	return port
}

var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

func onCleanup(fn func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, fn)
}

// Cleanup stops every server this package started and removes their data
// directories. Call it from TestMain after m.Run.
func Cleanup() {
	cleanupMu.Lock()
	fns := cleanups
	cleanups = nil
	cleanupMu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// findTool returns the first existing path among the env override, the
// install-script location and PATH, or "".
func findTool(envVar, cached string, names ...string) string {
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// toolsDir is where scripts/install-test-deps.sh puts MinIO and Azurite.
func toolsDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "sluice-tools")
}

// process is a child server that can be stopped and started again with the
// same command line (same port, same data directory).
type process struct {
	mu      sync.Mutex
	name    string
	path    string
	args    []string
	env     []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the test binary even if Cleanup is never called.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s (%s): %w", p.name, p.path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	p.cmd, p.exited = cmd, exited
	return nil
}

func (p *process) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	// Kill the process group: Node-based servers may fork helpers.
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
	p.cmd = nil
}

// running reports whether the child is alive.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) log() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitReady polls ready until it returns nil, the process dies or timeout.
func (p *process) waitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if !p.running() {
			return fmt.Errorf("%s exited during start-up; its log:\n%s", p.name, p.log())
		}
		if err = ready(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v (%v); its log:\n%s", p.name, timeout, err, p.log())
}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf(format, args...)
}
