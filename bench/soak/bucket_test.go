package soak

import (
	"os"
	"path/filepath"
	"testing"
)

// mkObject lays out one object the way a single-drive MinIO does: a
// directory named after the key's last element, holding xl.meta.
func mkObject(t *testing.T, root, key string, withMeta bool) {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(key))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if withMeta {
		if err := os.WriteFile(filepath.Join(dir, "xl.meta"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScanMinIOCountsObjectsAndHusks(t *testing.T) {
	root := t.TempDir()
	mkObject(t, root, "a/0000/0000000000000001-0000000000000001.ltx", true)
	mkObject(t, root, "a/0000/0000000000000002-0000000000000002.ltx", true)
	mkObject(t, root, "a/0000/0000000000000003-0000000000000003.ltx", false) // deleted, directory left
	mkObject(t, root, "a/0001/0000000000000001-0000000000000002.ltx", true)
	mkObject(t, root, "a/lease", true)
	mkObject(t, root, "b/0000/0000000000000001-0000000000000005.ltx", true)

	fast, err := scanMinIO(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if fast.Objects != 6 || fast.Husks != 0 {
		t.Errorf("fast scan: %d objects, %d husks; want 6, 0", fast.Objects, fast.Husks)
	}
	strict, err := scanMinIO(root, true)
	if err != nil {
		t.Fatal(err)
	}
	if strict.Objects != 5 || strict.Husks != 1 {
		t.Errorf("strict scan: %d objects, %d husks; want 5, 1", strict.Objects, strict.Husks)
	}
	// a's level 0 reaches TXID 2 (3 in the fast scan), level 1 covers 2: one
	// level-0 file beyond it only in the fast scan; b's only file is level 0.
	if strict.L0Files != 3 || strict.L0Behind != 1 {
		t.Errorf("strict scan: %d level-0 files, %d behind; want 3, 1", strict.L0Files, strict.L0Behind)
	}
	if strict.MaxTXID != 2+5 {
		t.Errorf("strict scan: MaxTXID sum %d, want 7", strict.MaxTXID)
	}
	if missing, err := scanMinIO(filepath.Join(root, "absent"), true); err != nil || missing.Objects != 0 {
		t.Errorf("absent root: %+v, %v", missing, err)
	}
}
