package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The restore progress bar is drawn on a terminal (script(1) gives the child
// a pseudo-terminal) and never in a pipe, where it would pollute logs.
func TestRestoreShowsProgressOnATerminalOnly(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatal("script(1) not found: apt-get install bsdutils")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(dir, "replica")
	if err := writer(t, db, 3000, 100, 0).wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	side := start(t, nil, sluiceBin, "replicate", db, rep)
	time.Sleep(500 * time.Millisecond)
	stopSidecar(t, side)

	onTTY := filepath.Join(dir, "tty.db")
	out, err := exec.Command(script, "-qefc", sluiceBin+" restore -o "+onTTY+" "+rep, "/dev/null").CombinedOutput()
	if err != nil {
		t.Fatalf("restore under script: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "100%") || !strings.Contains(string(out), "[#") {
		t.Fatalf("no progress bar on a terminal:\n%q", out)
	}

	piped := mustSluice(t, nil, "restore", "-o", filepath.Join(dir, "pipe.db"), rep)
	if strings.Contains(piped, "%") || strings.Contains(piped, "\r") {
		t.Fatalf("progress bar drawn into a pipe:\n%q", piped)
	}
}
