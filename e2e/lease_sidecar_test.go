package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

func waitFor(t *testing.T, p *process, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("%q did not appear within %s:\n%s", text, timeout, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A rolling deploy in sidecar mode: two overlapping `sluice run -lease` containers
// on one replica. The second does not start its app while the first holds
// the lease; once the first is SIGTERMed (its app writes a last row, which
// is shipped before the lease is released) the second restores exactly the
// first's final state, then its own writes continue the same history.
func TestRunLeaseOverlappingContainersHandOver(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	dbA := filepath.Join(t.TempDir(), "app.db")
	dbB := filepath.Join(t.TempDir(), "app.db")
	lease := []string{"-lease", "-lease-ttl", "3s", "-interval", "50ms"}

	a := start(t, m.Env(), sluiceBin, append(append([]string{"run"}, lease...), "-db", dbA, "-replica", url, "--", "python3", "-c", appScript, dbA, "100", "serve")...)
	waitFor(t, a, "ready", 30*time.Second)

	b := start(t, m.Env(), sluiceBin, append(append([]string{"run"}, lease...), "-db", dbB, "-replica", url, "--", "python3", "-c", appScript, dbB, "50", "serve")...)
	waitFor(t, b, "waiting for it", 10*time.Second)

	// Fail-fast contenders exit with code 4 at once, for run and for replicate.
	for _, args := range [][]string{
		{"run", "-lease", "-lease-fail-fast", "-db", filepath.Join(t.TempDir(), "c.db"), "-replica", url, "--", "true"},
		{"replicate", "-lease", "-lease-fail-fast", filepath.Join(t.TempDir(), "c.db"), url},
	} {
		out, err := sluice(t, m.Env(), args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(out, "LEASE HELD") {
			t.Fatalf("sluice %s with the lease held: %v, want exit code 4\n%s", args[0], err, out)
		}
	}

	time.Sleep(time.Second)
	if strings.Contains(b.out.String(), "count-at-start") {
		t.Fatalf("b started its app while a held the lease:\n%s", b.out.String())
	}

	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.wait(t, time.Minute); err != nil {
		t.Fatalf("a after SIGTERM: %v\n%s", err, a.out.String())
	}
	released := time.Now()
	waitFor(t, b, "count-at-start", 20*time.Second)
	t.Logf("b's app started %s after a exited", time.Since(released).Round(10*time.Millisecond))
	if !strings.Contains(b.out.String(), "count-at-start 101") {
		t.Fatalf("b did not restore a's final state (100 rows + the last row written on SIGTERM):\n%s", b.out.String())
	}
	waitFor(t, b, "ready", 30*time.Second)
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	if err := b.wait(t, time.Minute); err != nil {
		t.Fatalf("b after SIGTERM: %v\n%s", err, b.out.String())
	}

	out := filepath.Join(t.TempDir(), "restored.db")
	mustSluice(t, m.Env(), "restore", "-o", out, url)
	if rows, _, integrity := dbDigest(t, out); rows != 152 || integrity != "ok" {
		t.Fatalf("the replica restores %d rows (integrity %s), want 101 from a + 51 from b = 152", rows, integrity)
	}
}
