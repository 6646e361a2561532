package wal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/wal"
)

func TestReadIndexMaxFrameMatchesSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	c, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	must(t, err)
	defer c.Close()
	must(t, sqlitex.ExecuteTransient(c, "PRAGMA wal_autocheckpoint=0", nil))
	must(t, sqlitex.ExecuteTransient(c, "CREATE TABLE t (v)", nil))
	for i := 0; i < 5; i++ {
		must(t, sqlitex.ExecuteTransient(c, "INSERT INTO t VALUES (randomblob(3000))", nil))
	}
	walBytes, err := os.ReadFile(path + "-wal")
	must(t, err)
	shm, err := os.ReadFile(path + "-shm")
	must(t, err)
	hdr, err := wal.ParseHeader(walBytes[:wal.HeaderSize])
	must(t, err)

	mx, err := wal.ReadIndexMaxFrame(bytes.NewReader(shm), hdr)
	must(t, err)
	if frames := (int64(len(walBytes)) - wal.HeaderSize) / hdr.FrameSize(); int64(mx) != frames {
		t.Fatalf("mxFrame %d, the WAL holds %d frames", mx, frames)
	}

	// Copies that disagree (a header being rewritten) are not trusted.
	torn := append([]byte(nil), shm...)
	binary.NativeEndian.PutUint32(torn[16:], mx-1)
	if _, err := wal.ReadIndexMaxFrame(bytes.NewReader(torn), hdr); !errors.Is(err, wal.ErrIndexBusy) {
		t.Fatalf("torn index header: err = %v, want ErrIndexBusy", err)
	}
	// An index describing another WAL generation is not trusted either.
	other := hdr
	other.Salt1++
	if _, err := wal.ReadIndexMaxFrame(bytes.NewReader(shm), other); !errors.Is(err, wal.ErrIndexBusy) {
		t.Fatalf("other generation: err = %v, want ErrIndexBusy", err)
	}
}
