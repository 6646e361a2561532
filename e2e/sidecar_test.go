package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// stopSidecar sends SIGTERM and requires a clean exit: everything shipped.
func stopSidecar(t *testing.T, p *process) {
	t.Helper()
	// A SIGTERM that arrives before the process has set up its handlers
	// (its first microseconds) kills it outright: wait for its first log
	// line, written once it runs, as an operator's SIGTERM always comes after.
	for deadline := time.Now().Add(10 * time.Second); p.out.String() == "" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("sidecar exit after SIGTERM: %v\n%s", err, p.out.String())
	}
}

func TestReplicateUnderConcurrentWritesThenRestore(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")

	w := writer(t, db, 4000, 7, 2*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // let the app create the database first
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms", db, url)
	if err := w.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("writer: %v\n%s", err, w.out.String())
	}
	stopSidecar(t, side)

	out := filepath.Join(dir, "restored.db")
	mustSluice(t, m.Env(), "restore", "-integrity-check", "-o", out, url)
	if n := sameDB(t, db, out); n != 4000 {
		t.Fatalf("restored %d rows, want 4000", n)
	}
}

func TestKill9SidecarThenRestartLeavesNoGap(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")

	w := writer(t, db, 6000, 5, 2*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "50ms", db, url)
	time.Sleep(1500 * time.Millisecond)
	_ = side.cmd.Process.Signal(syscall.SIGKILL) // mid-stream, frames half shipped
	_ = side.wait(t, 10*time.Second)

	time.Sleep(500 * time.Millisecond) // the app keeps writing while nobody ships
	side2 := start(t, m.Env(), sluiceBin, "replicate", "-interval", "50ms", db, url)
	if err := w.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("writer: %v\n%s", err, w.out.String())
	}
	stopSidecar(t, side2)

	out := filepath.Join(dir, "restored.db")
	mustSluice(t, m.Env(), "restore", "-o", out, url)
	if n := sameDB(t, db, out); n != 6000 {
		t.Fatalf("restored %d rows, want 6000", n)
	}
}

// ltxFiles lists a file replica's LTX objects, relative to its root.
func ltxFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.Walk(filepath.Join(root, "ltx"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".ltx") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// ltxRange parses the TXID range from an LTX object's name.
func ltxRange(t *testing.T, key string) (min, max uint64) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(key), ".ltx")
	if _, err := fmt.Sscanf(name, "%016x-%016x", &min, &max); err != nil {
		t.Fatalf("bad LTX name %s: %v", key, err)
	}
	return min, max
}

func TestRestoreFailsClearlyOnCorruptObject(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := filepath.Join(dir, "replica")
	w := writer(t, db, 2000, 50, 0)
	if err := w.wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	side := start(t, nil, sluiceBin, "replicate", "-interval", "50ms", db, "file://"+rep)
	time.Sleep(500 * time.Millisecond)
	stopSidecar(t, side)

	files := ltxFiles(t, rep)
	if len(files) == 0 {
		t.Fatal("no LTX files in the replica")
	}
	victim := files[0] // the snapshot: every restore needs it
	path := filepath.Join(rep, filepath.FromSlash(victim))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(dir, "restored.db")
	msg, err := sluice(t, nil, "restore", "-o", out, "file://"+rep)
	if err == nil {
		t.Fatalf("restore of a corrupt replica succeeded:\n%s", msg)
	}
	if !strings.Contains(msg, filepath.Base(victim)) {
		t.Fatalf("error does not name the corrupt object %s:\n%s", victim, msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed restore left %s behind", out)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, "restored.db*"))
	if len(leftovers) > 0 {
		t.Fatalf("a failed restore left temp files: %v", leftovers)
	}
}

func TestRestoreFailsClearlyOnMissingObject(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := filepath.Join(dir, "replica")
	w := writer(t, db, 300, 1, 5*time.Millisecond)
	side := start(t, nil, sluiceBin, "replicate", "-interval", "20ms", db, "file://"+rep)
	if err := w.wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)
	// Remove every object that holds one TXID in the middle of the history, at
	// any level (compaction may have copied it upwards): the chain has a hole.
	top := maxTXID(t, rep)
	if top < 10 {
		t.Fatalf("want at least 10 TXIDs, got %d", top)
	}
	hole := top / 2
	removed := 0
	for _, f := range ltxFiles(t, rep) {
		min, max := ltxRange(t, f)
		if min <= hole && hole <= max {
			if err := os.Remove(filepath.Join(rep, filepath.FromSlash(f))); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	if removed == 0 {
		t.Fatalf("no object holds TXID %d", hole)
	}
	out := filepath.Join(dir, "restored.db")
	msg, err := sluice(t, nil, "restore", "-o", out, "file://"+rep)
	if err == nil {
		t.Fatalf("restore with a missing middle file succeeded:\n%s", msg)
	}
	if !strings.Contains(strings.ToLower(msg), "missing") && !strings.Contains(strings.ToLower(msg), "gap") {
		t.Fatalf("error does not say a file is missing:\n%s", msg)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed restore left %s behind", out)
	}
}
