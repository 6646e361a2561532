package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// SmallDisk mounts a tmpfs of size (e.g. "4m") at a new directory: a disk
// that fills up, for tests of a full disk. resize changes its size in
// place (giving the room back). Mounting needs root, which the test
// machines have; elsewhere the test is skipped with the reason.
func SmallDisk(t *testing.T, size string) (dir string, resize func(size string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a full disk is made with a tmpfs mount, which this machine refuses: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir, func(size string) {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
			t.Fatalf("resize the tmpfs at %s: %v %s", dir, err, out)
		}
	}
}
