package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

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

// A captured file the local disk cannot hold fails as ErrLocalDisk, so the
// sidecar blames the disk, not the replica.
func TestSpoolFailureIsALocalDiskError(t *testing.T) {
	s := newSpool(filepath.Join(t.TempDir(), "missing", "dir"), "app.db")
	_, err := s.Write(make([]byte, spoolMemory+1))
	if !errors.Is(err, ErrLocalDisk) {
		t.Fatalf("spool write into a missing directory: %v, want ErrLocalDisk", err)
	}
	s.close()
}
