package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newStore(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// buildHistory ships a varied history: schema, inserts, updates, deletes,
// growth past many pages, then a VACUUM that shrinks the file. One file per
// step, one second apart.
func buildHistory(t testing.TB, h *restoretest.History) {
	t.Helper()
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, b BLOB)")
	h.Ship(t0)
	for i := 0; i < 12; i++ {
		h.Script(fmt.Sprintf(`
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 40)
			INSERT INTO t (v, b) SELECT 'row-' || i || '-%d', randomblob(300) FROM n;
			UPDATE t SET v = v || '+' WHERE id %% 7 = %d;`, i, i%7))
		h.Ship(t0.Add(time.Duration(i+1) * time.Second))
	}
	h.Exec("DELETE FROM t WHERE id % 3 = 0")
	h.Ship(t0.Add(13 * time.Second))
	h.Exec("VACUUM")
	h.Ship(t0.Add(14 * time.Second))
	h.Exec("INSERT INTO t (v, b) VALUES ('last', zeroblob(5000))")
	h.Ship(t0.Add(15 * time.Second))
}

func restoreTo(t testing.TB, store replica.Store, opts Options) (string, Result, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	res, err := Restore(context.Background(), store, out, opts)
	return out, res, err
}

func wantExact(t *testing.T, h *restoretest.History, out string, txid ltx.TXID) {
	t.Helper()
	if got, want := restoretest.FileHash(t, out), h.Hashes[txid]; got != want {
		t.Fatalf("restored file differs from the source at TXID %d", txid)
	}
	restoretest.IntegrityCheck(t, out, "")
}

// wantNoOutput checks a failed restore left nothing in out's directory.
func wantNoOutput(t *testing.T, out string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("failed restore left %s behind", e.Name())
	}
}

func TestRestoreEveryTXIDIsExact(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	last := h.Pos().TXID
	for txid := ltx.TXID(1); txid <= last; txid++ {
		out, res, err := restoreTo(t, store, Options{TXID: txid, IntegrityCheck: true})
		if err != nil {
			t.Fatalf("TXID %d: %v", txid, err)
		}
		wantExact(t, h, out, txid)
		if res.Pos.TXID != txid || len(res.Files) != int(txid) {
			t.Fatalf("TXID %d: result %+v", txid, res.Pos)
		}
	}
	out, res, err := restoreTo(t, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, last)
	if res.Pos != h.Pos() {
		t.Fatalf("latest restore at %s, want %s", res.Pos, h.Pos())
	}
	if n := restoretest.IntegrityCheck(t, out, "t"); n == 0 {
		t.Fatal("restored table is empty")
	}
}

// compactInto merges files of the history into one file at level, with
// ltx.Compactor, the way Litestream's compaction does.
func compactInto(t *testing.T, store replica.Store, level int, files []replica.LTXFile) replica.LTXFile {
	t.Helper()
	ctx := context.Background()
	var rdrs []ioReader
	for _, f := range files {
		rc, err := store.Get(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		rdrs = append(rdrs, rc)
	}
	var buf strings.Builder
	c, err := ltx.NewCompactor(&buf, toReaders(rdrs))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	first, last := files[0], files[len(files)-1]
	f, err := replica.PutLTX(ctx, store, level, first.MinTXID, last.MaxTXID, []byte(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRestoreAcrossLevelsAndSnapshots(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXIDs 1..16
	fs := h.Files
	compactInto(t, store, 9, fs[0:8])  // snapshot 1..8
	compactInto(t, store, 2, fs[8:12]) // 9..12
	compactInto(t, store, 1, fs[8:10]) // 9..10
	compactInto(t, store, 1, fs[10:14])
	// Drop the L0 files the compactions cover, as retention would.
	var keys []string
	for _, f := range fs[:14] {
		keys = append(keys, f.Key)
	}
	if err := store.Delete(context.Background(), keys...); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		txid  ltx.TXID
		files int
	}{{0, 5}, {8, 1}, {10, 2}, {12, 2}, {14, 3}, {15, 4}} {
		out, res, err := restoreTo(t, store, Options{TXID: c.txid})
		if err != nil {
			t.Fatalf("TXID %d: %v", c.txid, err)
		}
		want := c.txid
		if want == 0 {
			want = h.Pos().TXID
		}
		wantExact(t, h, out, want)
		if len(res.Files) != c.files {
			t.Fatalf("TXID %d: plan %s, want %d files", c.txid, keysOf(res.Files), c.files)
		}
	}
	_, _, err := restoreTo(t, store, Options{TXID: 11})
	if err == nil || !strings.Contains(err.Error(), "inside compacted file") {
		t.Fatalf("TXID 11 was compacted away, want a clear error, got %v", err)
	}
}

func TestRestoreLitestreamStyleFilesWithoutChecksums(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	h.NoChecksum = true
	buildHistory(t, h)
	out, res, err := restoreTo(t, store, Options{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, h.Pos().TXID)
	if res.Pos.PostApplyChecksum == 0 {
		t.Fatal("result carries no computed checksum")
	}
}

func TestRestoreTimestampTarget(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXID n at t0 + (n-1)s
	for _, c := range []struct {
		at   time.Duration
		txid ltx.TXID
	}{{0, 1}, {500 * time.Millisecond, 1}, {4 * time.Second, 5}, {4900 * time.Millisecond, 5}, {time.Hour, 16}} {
		out, res, err := restoreTo(t, store, Options{Timestamp: t0.Add(c.at)})
		if err != nil {
			t.Fatalf("at %s: %v", c.at, err)
		}
		if res.Pos.TXID != c.txid {
			t.Fatalf("at t0+%s restored TXID %d, want %d", c.at, res.Pos.TXID, c.txid)
		}
		wantExact(t, h, out, c.txid)
	}
	out, _, err := restoreTo(t, store, Options{Timestamp: t0.Add(-time.Second)})
	if err == nil || !strings.Contains(err.Error(), "before the oldest restorable state") {
		t.Fatalf("timestamp before the first file: got %v", err)
	}
	wantNoOutput(t, out)
	if _, _, err := restoreTo(t, store, Options{Timestamp: t0, TXID: 3}); err == nil {
		t.Fatal("TXID and Timestamp together must be refused")
	}
}

// After a level-1 compaction some per-transaction files it covers may stay
// while others are gone; their TXIDs are not restore points. A timestamp
// falling on one resolves to the newest point before it that a chain reaches.
func TestRestoreTimestampSkipsTXIDsInsideACompactedRange(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXID n at t0 + (n-1)s
	fs := h.Files
	compactInto(t, store, 1, fs[2:8]) // TXIDs 3..8
	// Retention deleted TXIDs 3..5; 6..8 are still there, unreachable from 2.
	if err := store.Delete(context.Background(), fs[2].Key, fs[3].Key, fs[4].Key); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		txid ltx.TXID
	}{{6 * time.Second, 2}, {6500 * time.Millisecond, 2}, {7 * time.Second, 8}, {10 * time.Second, 11}} {
		out, res, err := restoreTo(t, store, Options{Timestamp: t0.Add(c.at)})
		if err != nil {
			t.Fatalf("at t0+%s: %v", c.at, err)
		}
		if res.Pos.TXID != c.txid {
			t.Fatalf("at t0+%s restored TXID %d, want %d", c.at, res.Pos.TXID, c.txid)
		}
		wantExact(t, h, out, c.txid)
	}
}

func TestRestoreCorruptObjectFailsNamingIt(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	victim := h.Files[6]
	path := filepath.Join(store.Root(), filepath.FromSlash(victim.Key))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{})
	if err == nil || !strings.Contains(err.Error(), victim.Key) {
		t.Fatalf("want an error naming %s, got %v", victim.Key, err)
	}
	wantNoOutput(t, out)
	// Before the damaged file the replica is still usable.
	out, _, err = restoreTo(t, store, Options{TXID: victim.MinTXID - 1})
	if err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, victim.MinTXID-1)
}

func TestRestoreMissingMiddleFileFails(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	if err := store.Delete(context.Background(), h.Files[9].Key); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{})
	if err == nil || !strings.Contains(err.Error(), "missing TXIDs") || !strings.Contains(err.Error(), "(10..10)") {
		t.Fatalf("want a gap error naming TXID 10, got %v", err)
	}
	wantNoOutput(t, out)
}

func TestRestoreForkedHistoryFailsOnChecksumChain(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	// A second database ships TXID 17 with a different pre-apply checksum.
	other := restoretest.New(t, newStore(t), t.TempDir())
	buildHistory(t, other)
	other.Exec("INSERT INTO t (v) VALUES ('fork')")
	f := other.Ship(t0.Add(time.Minute))
	data := readObject(t, other.Store, f.Key)
	if _, err := replica.PutLTX(context.Background(), store, 0, f.MinTXID, f.MaxTXID, data); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{})
	if err == nil || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), f.Key) {
		t.Fatalf("want a checksum chain error naming %s, got %v", f.Key, err)
	}
	wantNoOutput(t, out)
}

func TestRestoreWrongFinalChecksumFails(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	// A well-formed file whose post-apply checksum does not describe its pages.
	hdr := ltx.Header{Version: ltx.Version, PageSize: 4096, Commit: 4, MinTXID: 17, MaxTXID: 17,
		Timestamp: t0.UnixMilli(), PreApplyChecksum: h.Pos().PostApplyChecksum}
	page := make([]byte, 4096)
	data := restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 2, Data: page}}, h.Pos().PostApplyChecksum)
	if _, err := replica.PutLTX(context.Background(), store, 0, 17, 17, data); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{})
	if err == nil || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), replica.LTXKey(0, 17, 17)) {
		t.Fatalf("want a database checksum error, got %v", err)
	}
	wantNoOutput(t, out)
}

func TestRestoreIntegrityCheckCatchesBadContent(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	// A page of garbage with consistent checksums: only integrity_check can see it.
	src, err := os.ReadFile(h.Path)
	if err != nil {
		t.Fatal(err)
	}
	ps, commit := 4096, uint32(len(src)/4096)
	old := src[ps : 2*ps]
	bad := make([]byte, ps)
	for i := range bad {
		bad[i] = byte(i * 7)
	}
	post := ltx.ChecksumFlag | h.Pos().PostApplyChecksum ^ ltx.ChecksumPage(2, old) ^ ltx.ChecksumPage(2, bad)
	hdr := ltx.Header{Version: ltx.Version, PageSize: 4096, Commit: commit, MinTXID: 17, MaxTXID: 17,
		Timestamp: t0.UnixMilli(), PreApplyChecksum: h.Pos().PostApplyChecksum}
	data := restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 2, Data: bad}}, post)
	if _, err := replica.PutLTX(context.Background(), store, 0, 17, 17, data); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{IntegrityCheck: true})
	if err == nil || !strings.Contains(err.Error(), "integrity_check") {
		t.Fatalf("want an integrity_check failure, got %v", err)
	}
	wantNoOutput(t, out)
	// Without the check the checksums alone pass: the damage is in the source.
	if _, _, err := restoreTo(t, store, Options{}); err != nil {
		t.Fatalf("checksums are consistent, restore without -integrity-check should pass: %v", err)
	}
}

func TestRestoreProgressReportsEveryByte(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	var calls int
	var lastDone, lastTotal int64
	_, res, err := restoreTo(t, store, Options{Progress: func(done, total int64) {
		calls++
		if done < lastDone {
			t.Errorf("progress went backwards: %d after %d", done, lastDone)
		}
		lastDone, lastTotal = done, total
	}})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, f := range res.Files {
		want += f.Size
	}
	if calls < 2 || lastDone != want || lastTotal != want || res.Bytes != want {
		t.Fatalf("progress: %d calls, last %d/%d, result %d bytes; want %d", calls, lastDone, lastTotal, res.Bytes, want)
	}
}

func TestRestoreRefusesExistingOutputAndStaleWAL(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	dir := t.TempDir()
	out := filepath.Join(dir, "db")
	if err := os.WriteFile(out, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), store, out, Options{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("want already exists, got %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "mine" {
		t.Fatal("existing output was modified")
	}
	os.Remove(out)
	if err := os.WriteFile(out+"-wal", []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), store, out, Options{}); err == nil || !strings.Contains(err.Error(), "-wal") {
		t.Fatalf("want a stale WAL error, got %v", err)
	}
	if b, _ := os.ReadFile(out + "-wal"); string(b) != "stale" {
		t.Fatal("the user's -wal was modified")
	}
}

func TestRestoreEmptyReplicaIsErrNoReplica(t *testing.T) {
	out, _, err := restoreTo(t, newStore(t), Options{})
	if !errors.Is(err, ErrNoReplica) {
		t.Fatalf("want ErrNoReplica, got %v", err)
	}
	wantNoOutput(t, out)
}

func TestPageChecksumMatchesLTX(t *testing.T) {
	page := make([]byte, 4096)
	for i := range page {
		page[i] = byte(i)
	}
	for _, pgno := range []uint32{1, 2, 1 << 20} {
		if got, want := pageChecksum(pgno, page), ltx.ChecksumPage(pgno, page); got != want {
			t.Fatalf("page %d: %s != %s", pgno, got, want)
		}
	}
}

// A page is taken only from a file no later shrink cut off: here the database
// shrinks by two pages and grows back without rewriting them, so the old
// copies must not reappear; the restore fails naming the page.
func TestRestoreShrinkThenGrowWithoutPagesFails(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	_, res, err := restoreTo(t, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commit := res.Pages
	page := make([]byte, 4096)
	mid := ltx.ChecksumFlag | 0x1234
	ship := func(txid ltx.TXID, commit uint32, pre, post ltx.Checksum) {
		hdr := ltx.Header{Version: ltx.Version, PageSize: 4096, Commit: commit, MinTXID: txid, MaxTXID: txid,
			Timestamp: t0.UnixMilli(), PreApplyChecksum: pre}
		data := restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 2, Data: page}}, post)
		if _, err := replica.PutLTX(context.Background(), store, 0, txid, txid, data); err != nil {
			t.Fatal(err)
		}
	}
	ship(h.Pos().TXID+1, commit-2, h.Pos().PostApplyChecksum, mid)
	ship(h.Pos().TXID+2, commit, mid, mid)
	out, _, err := restoreTo(t, store, Options{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("holds page %d of", commit-1)) {
		t.Fatalf("want an error naming page %d, cut off by a shrink, got %v", commit-1, err)
	}
	wantNoOutput(t, out)
}

// The lead (the largest file, written before the database's final size is
// known) may hold pages a later file cut off by shrinking the database: the
// result must not keep them.
func TestRestoreCutsOffLeadPagesPastTheFinalSize(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	h.Exec("PRAGMA auto_vacuum = INCREMENTAL")
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)")
	h.Ship(t0)
	h.Exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 400) INSERT INTO t (b) SELECT randomblob(1000) FROM n")
	lead := h.Ship(t0.Add(time.Second))
	_, grown, err := restoreTo(t, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.Exec("DELETE FROM t WHERE id > 20")
	h.Exec("PRAGMA incremental_vacuum")
	last := h.Ship(t0.Add(2 * time.Second))
	if last.Size >= lead.Size {
		t.Fatalf("the shrinking file (%d bytes) should be smaller than the lead (%d)", last.Size, lead.Size)
	}
	out, res, err := restoreTo(t, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages >= grown.Pages/2 {
		t.Fatalf("the database should have shrunk from %d pages, restored %d", grown.Pages, res.Pages)
	}
	wantExact(t, h, out, h.Pos().TXID)
	if fi, err := os.Stat(out); err != nil || fi.Size() != int64(res.Pages)*int64(res.PageSize) {
		t.Fatalf("restored file: %v, %v; want %d pages", fi.Size(), err, res.Pages)
	}
}

// A restore of the newest state lists level 0 only past what the upper
// levels cover; when those leave a gap (here no upper file starts at TXID 1),
// it lists every level and restores from level 0.
func TestRestoreNewestListsEveryLevelWhenUpperLevelsLeaveAGap(t *testing.T) {
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXIDs 1..16
	l1 := compactInto(t, store, 1, h.Files[5:10])
	var logs bytes.Buffer
	out := filepath.Join(t.TempDir(), "restored.db")
	res, err := Restore(context.Background(), store, out, Options{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	wantExact(t, h, out, h.Pos().TXID)
	if !strings.Contains(logs.String(), "restore listed every level") {
		t.Fatalf("the short listing (upper levels cover %s) should not have sufficed:\n%s", l1.Key, logs.String())
	}
	if res.Pos != h.Pos() {
		t.Fatalf("restored %s, want %s", res.Pos, h.Pos())
	}
}
