package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/superfly/ltx"
)

// The position file is rewritten in place; a shorter record must replace a
// longer one whole, including one written by RecordPosition (restore).
func TestPositionFileRewritesInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	replicaURL := "s3://bucket/prefix?endpoint=http://127.0.0.1:9000"
	must(t, RecordPosition(path, replicaURL+"&long-enough-to-be-longer=1", ltx.Pos{TXID: 123456789, PostApplyChecksum: 0xdeadbeef}))
	var pf positionFile
	defer pf.close()
	for _, pos := range []ltx.Pos{{TXID: 7, PostApplyChecksum: 0x8000000000000001}, {TXID: 8, PostApplyChecksum: 0x8000000000000002}} {
		must(t, pf.record(path, replicaURL, pos))
		if got := recordedChecksum(path, replicaURL, pos.TXID); got != pos.PostApplyChecksum {
			t.Fatalf("recorded checksum at TXID %d = %s, want %s", pos.TXID, got, pos.PostApplyChecksum)
		}
		if got := recordedChecksum(path, replicaURL, pos.TXID-1); got != 0 {
			t.Fatalf("stale TXID %d still matches: %s", pos.TXID-1, got)
		}
	}
	b, err := os.ReadFile(path + stateSuffix)
	must(t, err)
	if len(b) == 0 || b[0] != '{' {
		t.Fatalf("position file = %q", b)
	}
}

// A captured file neither the database's disk nor the temp directory can
// hold fails as ErrLocalDisk, so the sidecar blames the disk, not the replica.
func TestSpoolFailureIsALocalDiskError(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing", "tmp")) // the fallback fails too
	s := newSpool(filepath.Join(t.TempDir(), "missing", "dir"), "app.db")
	_, err := s.Write(make([]byte, spoolMemory+1))
	if !errors.Is(err, ErrLocalDisk) {
		t.Fatalf("spool write into a missing directory: %v, want ErrLocalDisk", err)
	}
	s.close()
}

// A spool whose file fills the database's disk moves, with what it holds,
// to the temp directory: commits already made ship while that disk is full.
func TestSpoolMovesToTheTempDirectoryWhenTheDiskIsFull(t *testing.T) {
	disk, _ := testenv.SmallDisk(t, "1m")
	t.Setenv("TMPDIR", t.TempDir())
	want := make([]byte, spoolMemory+3<<20)
	for i := range want {
		want[i] = byte(i*13 + i/4096)
	}
	s := newSpool(disk, "app.db")
	defer s.close()
	for off := 0; off < len(want); off += 100_000 {
		if _, err := s.Write(want[off:min(off+100_000, len(want))]); err != nil {
			t.Fatalf("spool write at %d on a full disk: %v", off, err)
		}
	}
	must(t, s.finish())
	if s.f == nil || !s.f.moved {
		t.Fatal("the spool did not move to the temp directory")
	}
	same, err := sameBytes(s.reader(), bytes.NewReader(want))
	must(t, err)
	if !same {
		t.Fatal("the moved spool reads back differently")
	}
	var st syscall.Statfs_t
	must(t, syscall.Statfs(disk, &st))
	if st.Bfree < st.Blocks*9/10 {
		t.Errorf("the full disk kept %d of %d blocks after the spool moved", st.Blocks-st.Bfree, st.Blocks)
	}
}
