package restore

import (
	"context"
	"log/slog"
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

// TestRestoreRemovesTempFilesOfInterruptedRestores: a restore killed with
// kill -9 leaves its temp file, of the database's size, beside the output.
// The next restore of that output removes such files and logs each, but
// never a temp file a running restore holds, another output's temp files,
// or anything else in the folder.
func TestRestoreRemovesTempFilesOfInterruptedRestores(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	dir := t.TempDir()
	out := filepath.Join(dir, "db.sqlite")
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	abandoned := []string{write(".db.sqlite.restore-1x2y3z.tmp"), write(".db.sqlite.restore-0.tmp")}
	walOfAbandoned := write(".db.sqlite.restore-1x2y3z.tmp-wal")
	kept := []string{
		write(".other.sqlite.restore-1x2y3z.tmp"),     // another output's
		write(".db.sqlite.restore-1x2y3z.tmp.keep"),   // not the pattern
		write("db.sqlite.restore-1x2y3z.tmp"),         // no leading dot
		write(".db.sqlite.restore-NOTOURS.tmp"),       // not a name a restore makes
		write(".db.sqlite.restore-.tmp"),              // no number
		write(".xdb.sqlite.restore-1x2y3z.tmp"),       // prefix of another name
		write(".db.sqlite.restore-1x2y3z.tmpx"),       // suffix differs
		write(".db.sqlite.restore-1x2y3z.tmp.sqlite"), // suffix differs
	}
	live := write(".db.sqlite.restore-abc123.tmp")
	lf, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}

	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := Restore(context.Background(), store, out, Options{Logger: log}); err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, h.Pos().TXID)
	for _, p := range append(abandoned, walOfAbandoned) {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: the leftover of an interrupted restore is still there (stat: %v)", filepath.Base(p), err)
		}
	}
	for _, p := range append(kept, live) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: removed, but it is not an abandoned temp file of this output: %v", filepath.Base(p), err)
		}
	}
	for _, p := range abandoned {
		if !strings.Contains(logs.String(), "path="+p) {
			t.Errorf("no log line names the removed %s; log:\n%s", p, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "removed the temporary file of an earlier restore"); n != len(abandoned) {
		t.Errorf("%d removal lines, want %d; log:\n%s", n, len(abandoned), logs.String())
	}
	// No temp file of this restore is left either.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if isTempName(e.Name(), "db.sqlite") && filepath.Join(dir, e.Name()) != live {
			t.Errorf("temp file %s left after a successful restore", e.Name())
		}
	}
}
