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

// Two sidecars of two different databases on one replica (an overlapping
// deploy without leases): whichever loses a conditional create stops with
// exit code 3 and says so; the replica never forks and restores to exactly
// the database of the one that kept going.
func TestTwoWritersOnOneReplicaOneIsFenced(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	dir := t.TempDir()
	dbA, dbB := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")

	wA := writer(t, dbA, 100000, 3, 2*time.Millisecond)
	wB := writer(t, dbB, 100000, 3, 2*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	sideA := start(t, m.Env(), sluiceBin, "replicate", "-interval", "20ms", dbA, url)
	sideB := start(t, m.Env(), sluiceBin, "replicate", "-interval", "20ms", dbB, url)

	var fenced, survivor *process
	var survivorDB string
	deadline := time.After(90 * time.Second)
	for fenced == nil {
		select {
		case err := <-sideA.done:
			sideA.done <- err
			fenced, survivor, survivorDB = sideA, sideB, dbB
		case err := <-sideB.done:
			sideB.done <- err
			fenced, survivor, survivorDB = sideB, sideA, dbA
		case <-deadline:
			t.Fatalf("neither sidecar was fenced:\nA:\n%s\nB:\n%s", sideA.out.String(), sideB.out.String())
		}
	}
	err := fenced.wait(t, time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("fenced sidecar: want exit code 3, got %v\n%s", err, fenced.out.String())
	}
	if !strings.Contains(fenced.out.String(), "FENCED") {
		t.Fatalf("fenced sidecar did not say so:\n%s", fenced.out.String())
	}

	// Stop both apps, let the survivor ship everything, and restore.
	_ = wA.cmd.Process.Kill()
	_ = wB.cmd.Process.Kill()
	_ = wA.wait(t, 10*time.Second)
	_ = wB.wait(t, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	_ = survivor.cmd.Process.Signal(syscall.SIGTERM)
	if err := survivor.wait(t, time.Minute); err != nil {
		t.Fatalf("surviving sidecar: %v\n%s", err, survivor.out.String())
	}
	out := filepath.Join(dir, "restored.db")
	mustSluice(t, m.Env(), "restore", "-integrity-check", "-o", out, url)
	sameDB(t, survivorDB, out)
}
