package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// TestRestoreGuards: what a user restoring onto a fresh machine expects from
// `sluice restore`: missing folders are created, the file gets the umask's
// mode, -integrity-check quick|full keeps a damaged database out of place,
// and a damaged compacted file is replaced by the level-0 files under it,
// with one line saying so.
func TestRestoreGuards(t *testing.T) {
	root := filepath.Join(t.TempDir(), "replica")
	store, err := file.New(root)
	if err != nil {
		t.Fatal(err)
	}
	url := "file://" + root
	h := restoretest.New(t, store, t.TempDir())
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
	h.Ship(t0)
	for i := range 6 {
		h.Exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 200) INSERT INTO t (v) SELECT 'row-' || ? || '-' || i FROM n", i)
		h.Ship(t0.Add(time.Duration(i+1) * time.Second))
	}
	good := h.Pos() // TXID 7
	l1 := compactLTX(t, store, 1, h.Files[2:6])

	// A damaged level-1 file: the level-0 files under it take its place.
	damaged := readAll(t, store, l1.Key)
	damaged[len(damaged)/2] ^= 0xff
	if _, err := store.Put(context.Background(), l1.Key, bytes.NewReader(damaged), int64(len(damaged))); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	out := filepath.Join(t.TempDir(), "fresh", "data", "app.db")
	said := mustSluice(t, nil, "restore", "-q", "-o", out, url)
	if strings.Count(said, "damaged replica file left out") != 1 || !strings.Contains(said, l1.Key) {
		t.Fatalf("want one line naming the damaged file %s, got:\n%s", l1.Key, said)
	}
	if n := restoretest.IntegrityCheck(t, out, "t"); n != 1200 {
		t.Fatalf("restored %d rows, want 1200", n)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("restored file under umask 022: %v, %v; want mode 0644", fi.Mode(), err)
	}

	// A page of garbage whose checksums are consistent: only SQLite's checks see it.
	src, err := os.ReadFile(h.Path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	bad := make([]byte, ps)
	for i := range bad {
		bad[i] = byte(i * 13)
	}
	post := ltx.ChecksumFlag | good.PostApplyChecksum ^ ltx.ChecksumPage(2, src[ps:2*ps]) ^ ltx.ChecksumPage(2, bad)
	hdr := ltx.Header{Version: ltx.Version, PageSize: ps, Commit: uint32(len(src) / ps), MinTXID: good.TXID + 1, MaxTXID: good.TXID + 1,
		Timestamp: t0.Add(time.Minute).UnixMilli(), PreApplyChecksum: good.PostApplyChecksum}
	if _, err := replica.PutLTX(context.Background(), store, 0, good.TXID+1, good.TXID+1,
		restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 2, Data: bad}}, post)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, mode := range []string{"quick", "full"} {
		bad := filepath.Join(dir, mode, "bad.db")
		said, err := sluice(t, nil, "restore", "-q", "-integrity-check", mode, "-o", bad, url)
		if err == nil || !strings.Contains(said, "integrity check failed") {
			t.Fatalf("-integrity-check %s on a damaged database: want a failure, got %v:\n%s", mode, err, said)
		}
		if _, err := os.Stat(bad); !os.IsNotExist(err) {
			t.Fatalf("-integrity-check %s failed but %s was placed (%v)", mode, bad, err)
		}
		ok := filepath.Join(dir, mode, "ok.db")
		mustSluice(t, nil, "restore", "-q", "-o", ok, "-integrity-check="+mode, "-txid", good.TXID.String(), url)
	}
	// Without a check the consistent checksums pass, as Litestream's default.
	mustSluice(t, nil, "restore", "-q", "-integrity-check", "none", "-o", filepath.Join(dir, "none.db"), url)
	if _, err := sluice(t, nil, "restore", "-q", "-integrity-check", "fast", "-o", filepath.Join(dir, "x.db"), url); err == nil {
		t.Fatal("-integrity-check fast was accepted")
	}
}

func readAll(t *testing.T, s replica.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compactLTX merges files into one file at level with ltx.Compactor, as
// Litestream's compaction does, leaving the inputs in place.
func compactLTX(t *testing.T, s replica.Store, level int, files []replica.LTXFile) replica.LTXFile {
	t.Helper()
	var rdrs []io.Reader
	for _, f := range files {
		rdrs = append(rdrs, bytes.NewReader(readAll(t, s, f.Key)))
	}
	var buf bytes.Buffer
	c, err := ltx.NewCompactor(&buf, rdrs)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := replica.PutLTX(context.Background(), s, level, files[0].MinTXID, files[len(files)-1].MaxTXID, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}
