package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/minioproc"
	"github.com/sluicedb/sluice/internal/testenv"
)

// Fail closed: a sidecar whose replica cannot work says why in one short
// line and exits non-zero before the application starts; a store that goes
// away stops it after the error budget; readiness follows the store.

// exitCode returns a finished command's exit code (-1 if it did not exit).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// oneLine asserts out is one non-empty line, short, containing want.
func oneLine(t *testing.T, out, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) || len(lines[0]) > 300 {
		t.Fatalf("want one line (< 300 bytes) containing %q, got %d lines:\n%s", want, len(lines), out)
	}
}

// noCredentials is an environment without any AWS credential source.
var noCredentials = []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
	"AWS_CONFIG_FILE=/nonexistent/config", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/credentials", "AWS_EC2_METADATA_DISABLED=true"}

func TestSidecarRefusesUnusableReplica(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	db := filepath.Join(t.TempDir(), "app.db")
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no credentials", noCredentials, []string{db, m.URL(bucket, "app")}, 5, "no credentials found: set AWS_ACCESS_KEY_ID"},
		{"wrong secret", append(m.Env(), "AWS_SECRET_ACCESS_KEY=wrong-secret"), []string{db, m.URL(bucket, "app")}, 5, "access denied (SignatureDoesNotMatch"},
		{"no bucket", m.Env(), []string{db, m.URL("no-such-bucket-here", "app")}, 5, "no such bucket (NoSuchBucket"},
		{"missing folder", m.Env(), []string{filepath.Join(t.TempDir(), "nope", "app.db"), m.URL(bucket, "app")}, 1, "does not exist: create it or correct the path"},
		{"directory as database", m.Env(), []string{t.TempDir(), m.URL(bucket, "app")}, 1, "is a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out, err := sluice(t, c.env, append([]string{"replicate", "-replica-error-budget", "3s"}, c.args...)...)
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit code %d, want %d; output:\n%s", got, c.code, out)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("took %s to give up", d)
			}
			oneLine(t, out, c.want)
			marker := filepath.Join(t.TempDir(), "started")
			if c.name == "missing folder" {
				// run is a container's entrypoint on a fresh machine: it creates the folder, as restore does.
				out, err = sluice(t, c.env, "run", "-replica-error-budget", "3s", "-db", c.args[0], "-replica", c.args[1], "--", "touch", marker)
				if err != nil {
					t.Fatalf("run with a missing folder: %v\n%s", err, out)
				}
				if _, err := os.Stat(filepath.Dir(c.args[0])); err != nil {
					t.Fatalf("run did not create the database's folder: %v", err)
				}
				return
			}
			// run refuses the same way, and never starts the application.
			out, err = sluice(t, c.env, "run", "-replica-error-budget", "3s", "-db", c.args[0], "-replica", c.args[1], "--", "touch", marker)
			if got := exitCode(err); got != c.code {
				t.Fatalf("run: exit code %d, want %d; output:\n%s", got, c.code, out)
			}
			oneLine(t, out, c.want)
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("run started the application although the replica is unusable")
			}
		})
	}
}

// ownMinIO starts a MinIO this test may stop and restart without disturbing others.
func ownMinIO(t *testing.T) (*minioproc.Server, string) {
	t.Helper()
	srv, err := minioproc.New(t.TempDir(), testenv.MinIOUser, testenv.MinIOPassword)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := srv.Run(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if err := srv.CreateBucket(ctx, "outage"); err != nil {
		t.Fatal(err)
	}
	return srv, "outage"
}

// steadyApp is an application that inserts a row every 100 ms until SIGTERM.
const steadyApp = `
import sqlite3, sys, time, signal
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
while True:
    db.execute("INSERT INTO t (v) VALUES ('x')")
    time.sleep(0.1)
`

func TestRunStopsAppWhenStoreStaysDown(t *testing.T) {
	t.Parallel()
	srv, bucket := ownMinIO(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	p := start(t, srv.Env(), sluiceBin, "run", "-replica-error-budget", "3s", "-db", db, "-replica", srv.URL(bucket, "app"), "--", "python3", "-c", steadyApp, db)
	waitUntil(t, 30*time.Second, func() bool { _, err := os.Stat(db); return err == nil }, p)
	time.Sleep(time.Second) // a few uploads succeed
	srv.Stop()
	stopped := time.Now()
	err := p.wait(t, 90*time.Second)
	if got := exitCode(err); got != 5 {
		t.Fatalf("exit code %d, want 5; output:\n%s", got, p.out.String())
	}
	out := p.out.String()
	if !strings.Contains(out, "REPLICA UNAVAILABLE") || !strings.Contains(out, "terminating the application") {
		t.Fatalf("no clear reason in the output:\n%s", out)
	}
	if strings.Contains(out, "every change is in the replica") {
		t.Fatalf("claims the replica is complete:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 600 {
			t.Fatalf("log line of %d bytes: one cause, not a stack of retries:\n%s", len(line), line)
		}
	}
	t.Logf("stopped %s after the store went down; output:\n%s", time.Since(stopped).Round(time.Second), out)
}

func TestContinueKeepsAppRunningAndCatchesUp(t *testing.T) {
	t.Parallel()
	srv, bucket := ownMinIO(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	url := srv.URL(bucket, "app")
	p := start(t, srv.Env(), sluiceBin, "run", "-replica-error-budget", "2s", "-on-replica-error=continue", "-db", db, "-replica", url, "--", "python3", "-c", steadyApp, db)
	waitUntil(t, 30*time.Second, func() bool { _, err := os.Stat(db); return err == nil }, p)
	srv.Stop()
	select {
	case err := <-p.done:
		t.Fatalf("exited (%v) although -on-replica-error=continue; output:\n%s", err, p.out.String())
	case <-time.After(8 * time.Second):
	}
	if err := srv.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("exit: %v; output:\n%s", err, p.out.String())
	}
	out := filepath.Join(dir, "restored.db")
	mustSluice(t, srv.Env(), "restore", "-o", out, url)
	n1 := countRows(t, db)
	if n2 := countRows(t, out); n2 != n1 || n1 == 0 {
		t.Fatalf("restored %d rows, the application wrote %d", n2, n1)
	}
}

func countRows(t *testing.T, path string) int {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from t').fetchone()[0])", path).CombinedOutput()
	if err != nil {
		t.Fatalf("count rows in %s: %v %s", path, err, out)
	}
	var n int
	fmt.Sscan(string(out), &n)
	return n
}

func waitUntil(t *testing.T, timeout time.Duration, cond func() bool, p *process) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s; output:\n%s", timeout, p.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readyCode(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// readinessFollowsStore checks /ready through a store outage.
func readinessFollowsStore(t *testing.T, srv *minioproc.Server, base string, p *process) {
	t.Helper()
	waitUntil(t, 30*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)
	srv.Stop()
	down := time.Now()
	waitUntil(t, 15*time.Second, func() bool { return readyCode(base+"/ready") == 503 }, p)
	t.Logf("/ready 503 %s after the store stopped", time.Since(down).Round(100*time.Millisecond))
	if c := readyCode(base + "/health"); c != 200 {
		t.Fatalf("/health %d while the process runs", c)
	}
	if err := srv.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	waitUntil(t, 20*time.Second, func() bool { return readyCode(base+"/ready") == 200 }, p)
	t.Logf("/ready 200 %s after the store restarted", time.Since(up).Round(100*time.Millisecond))
}

func TestServeReadyFollowsStore(t *testing.T) {
	srv, bucket := ownMinIO(t)
	port := testenv.FreePort()
	p := start(t, srv.Env(), sluiceBin, "serve", "-data", t.TempDir(), "-replica", srv.URL(bucket, ""),
		"-listen", fmt.Sprintf("127.0.0.1:%d", port), "-replica-error-budget", "4s")
	readinessFollowsStore(t, srv, fmt.Sprintf("http://127.0.0.1:%d", port), p)
}

func TestSidecarAddrReadyFollowsStore(t *testing.T) {
	srv, bucket := ownMinIO(t)
	port := testenv.FreePort()
	db := filepath.Join(t.TempDir(), "app.db")
	// No error budget exit here: continue, so the outage only changes readiness.
	p := start(t, srv.Env(), sluiceBin, "replicate", "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-replica-error-budget", "4s",
		"-on-replica-error=continue", db, srv.URL(bucket, "app"))
	w := start(t, nil, "python3", "-c", steadyApp, db)
	defer w.cmd.Process.Signal(syscall.SIGTERM)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	readinessFollowsStore(t, srv, base, p)
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, name := range []string{"sluice_replica_last_success_age_seconds{", "sluice_unshipped_bytes{", "sluice_replication_txid{", "sluice_upload_errors_total{"} {
		if !strings.Contains(b.String(), name) {
			t.Fatalf("/metrics lacks %s:\n%s", name, b.String())
		}
	}
}
