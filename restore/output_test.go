package restore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

func TestRestoreCreatesMissingParentFolders(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	out := filepath.Join(t.TempDir(), "data", "app", "db.sqlite")
	if _, err := Restore(context.Background(), store, out, Options{}); err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, h.Pos().TXID)
}

func TestRestoredFileModeFollowsUmask(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	for _, c := range []struct {
		umask int
		want  os.FileMode
	}{{0o022, 0o644}, {0o077, 0o600}, {0o002, 0o664}} {
		old := syscall.Umask(c.umask)
		out := filepath.Join(t.TempDir(), "db.sqlite")
		_, err := Restore(context.Background(), store, out, Options{})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.want {
			t.Fatalf("umask %03o: restored file has mode %v, want %v", c.umask, fi.Mode().Perm(), c.want)
		}
	}
}

// TestRestoreQuickCheckCatchesBadContent: a page of garbage whose checksums
// are consistent is caught by PRAGMA quick_check, and nothing is put in place.
func TestRestoreQuickCheckCatchesBadContent(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	src, err := os.ReadFile(h.Path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	commit := uint32(len(src) / ps)
	old := src[ps : 2*ps]
	bad := make([]byte, ps)
	for i := range bad {
		bad[i] = byte(i * 13)
	}
	post := ltx.ChecksumFlag | h.Pos().PostApplyChecksum ^ ltx.ChecksumPage(2, old) ^ ltx.ChecksumPage(2, bad)
	hdr := ltx.Header{Version: ltx.Version, PageSize: ps, Commit: commit, MinTXID: 17, MaxTXID: 17,
		Timestamp: t0.UnixMilli(), PreApplyChecksum: h.Pos().PostApplyChecksum}
	data := restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 2, Data: bad}}, post)
	if _, err := replica.PutLTX(context.Background(), store, 0, 17, 17, data); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{QuickCheck: true})
	if err == nil || !strings.Contains(err.Error(), "quick_check") {
		t.Fatalf("want a quick_check failure, got %v", err)
	}
	wantNoOutput(t, out)
	// The state before the damage passes the same check.
	out, _, err = restoreTo(t, store, Options{QuickCheck: true, TXID: 16})
	if err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, 16)
}
