package wal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/wal"
)

// makeWAL writes a table with real SQLite (autocheckpoint off) in txs
// transactions and returns a copy of the -wal taken while the DB is open,
// plus a copy of the DB file and the expected row count.
func makeWAL(t *testing.T, txs int) (walBytes []byte, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "app.db")
	c, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	must(t, sqlitex.ExecuteTransient(c, "PRAGMA wal_autocheckpoint=0", nil))
	must(t, sqlitex.ExecuteTransient(c, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)", nil))
	must(t, sqlitex.ExecuteTransient(c, "PRAGMA wal_checkpoint(TRUNCATE)", nil)) // table lives in the DB file
	for i := 0; i < txs; i++ {
		must(t, sqlitex.Execute(c, "INSERT INTO t(v) VALUES (?)", &sqlitex.ExecOptions{Args: []any{fmt.Sprintf("row %d %0500d", i, i)}}))
	}
	walBytes, err = os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	dbCopy, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dbPath = filepath.Join(t.TempDir(), "copy.db")
	must(t, os.WriteFile(dbPath, dbCopy, 0o644))
	return walBytes, dbPath
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type readResult struct {
	frames, commits int
	commitOff       int64
	sum             wal.Checksum
	stop            wal.StopReason
	pages           map[uint32][]byte // committed pages, newest wins
	commitSize      uint32
}

func readAll(t *testing.T, b []byte, off int64, sum *wal.Checksum) (wal.Header, readResult) {
	t.Helper()
	hdr, err := wal.ParseHeader(b)
	must(t, err)
	s := hdr.Checksum
	if sum != nil {
		s = *sum
	}
	r, err := wal.NewReader(bytesAt(b), hdr, off, s)
	must(t, err)
	res := readResult{pages: map[uint32][]byte{}}
	tx := map[uint32][]byte{}
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		res.frames++
		tx[f.Pgno] = append([]byte(nil), f.Data...)
		if f.Commit != 0 {
			res.commits++
			for p, d := range tx {
				res.pages[p] = d
			}
			clear(tx)
		}
	}
	res.commitOff, res.sum, res.stop, res.commitSize = r.CommitOffset(), r.CommitChecksum(), r.Stopped(), r.CommitSize()
	return hdr, res
}

type bytesAt []byte

func (b bytesAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func TestReadRealWAL(t *testing.T) {
	b, dbPath := makeWAL(t, 20)
	hdr, res := readAll(t, b, wal.HeaderSize, nil)
	if hdr.PageSize != 4096 || (hdr.Magic != wal.MagicLittleEndian && hdr.Magic != wal.MagicBigEndian) {
		t.Fatalf("header: %+v", hdr)
	}
	if res.commits != 20 {
		t.Fatalf("commit frames: got %d, want 20", res.commits)
	}
	if res.commitOff != int64(len(b)) || res.stop != wal.StopEOF {
		t.Fatalf("commit offset %d (stop %s), file is %d bytes", res.commitOff, res.stop, len(b))
	}
	// Applying the committed pages to the DB file must give SQLite's view.
	f, err := os.OpenFile(dbPath, os.O_RDWR, 0)
	must(t, err)
	for p, d := range res.pages {
		_, err := f.WriteAt(d, int64(p-1)*int64(hdr.PageSize))
		must(t, err)
	}
	must(t, f.Truncate(int64(res.commitSize)*int64(hdr.PageSize)))
	must(t, f.Close())
	c, err := sqlite.OpenConn(dbPath, sqlite.OpenReadOnly)
	must(t, err)
	defer c.Close()
	var n int
	must(t, sqlitex.ExecuteTransient(c, "SELECT count(*) FROM t", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt(0); return nil }}))
	if n != 20 {
		t.Fatalf("rows after applying the WAL: %d, want 20", n)
	}
}

func TestResumeFromCommitOffset(t *testing.T) {
	b, _ := makeWAL(t, 10)
	hdr, err := wal.ParseHeader(b)
	must(t, err)
	// Stop after 4 transactions, then resume from the reported commit offset
	// and running checksum.
	_, all := readAll(t, b, wal.HeaderSize, nil)
	r, err := wal.NewReader(bytesAt(b), hdr, wal.HeaderSize, hdr.Checksum)
	must(t, err)
	commits := 0
	for commits < 4 {
		f, err := r.Next()
		must(t, err)
		if f.Commit != 0 {
			commits++
		}
	}
	_, rest := readAll(t, b, r.CommitOffset(), ptr(r.CommitChecksum()))
	if rest.commits != 6 || rest.commitOff != all.commitOff || rest.sum != all.sum {
		t.Fatalf("resumed: %d commits to %d, want 6 to %d", rest.commits, rest.commitOff, all.commitOff)
	}
	// A wrong starting checksum breaks the chain at once.
	_, bad := readAll(t, b, r.CommitOffset(), ptr(wal.Checksum{1, 2}))
	if bad.frames != 0 || bad.stop != wal.StopChecksum {
		t.Fatalf("wrong running checksum: %d frames, stop %s", bad.frames, bad.stop)
	}
}

func ptr[T any](v T) *T { return &v }

func TestTruncatedWAL(t *testing.T) {
	b, _ := makeWAL(t, 5)
	hdr, full := readAll(t, b, wal.HeaderSize, nil)
	// Cut in the middle of the last frame: the last transaction is lost, the
	// one before is complete.
	cut := b[:len(b)-int(hdr.PageSize)/2]
	_, res := readAll(t, cut, wal.HeaderSize, nil)
	if res.commits != full.commits-1 || res.stop != wal.StopEOF {
		t.Fatalf("truncated: %d commits (stop %s), want %d", res.commits, res.stop, full.commits-1)
	}
	if res.commitOff >= int64(len(cut)) || (res.commitOff-wal.HeaderSize)%hdr.FrameSize() != 0 {
		t.Fatalf("commit offset %d not a frame boundary inside %d bytes", res.commitOff, len(cut))
	}
	// Only a header: no frames.
	_, none := readAll(t, b[:wal.HeaderSize], wal.HeaderSize, nil)
	if none.frames != 0 || none.commitOff != wal.HeaderSize {
		t.Fatalf("empty WAL: %+v", none)
	}
}

func TestCorruptFrameStopsChain(t *testing.T) {
	b, _ := makeWAL(t, 6)
	hdr, full := readAll(t, b, wal.HeaderSize, nil)
	frames := (int64(len(b)) - wal.HeaderSize) / hdr.FrameSize()
	k := frames / 2 // corrupt a page byte of this (1-based) frame
	corrupt := append([]byte(nil), b...)
	corrupt[hdr.FrameOffset(k)+wal.FrameHeaderSize+100] ^= 0xff
	_, res := readAll(t, corrupt, wal.HeaderSize, nil)
	if res.stop != wal.StopChecksum || int64(res.frames) != k-1 {
		t.Fatalf("corrupt frame %d: read %d frames, stop %s", k, res.frames, res.stop)
	}
	if res.commitOff > hdr.FrameOffset(k) || res.commits >= full.commits {
		t.Fatalf("commit offset %d beyond the corrupt frame at %d", res.commitOff, hdr.FrameOffset(k))
	}

	// A frame carrying other salts belongs to an older log generation.
	salted := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(salted[hdr.FrameOffset(k)+8:], hdr.Salt1+1)
	_, res = readAll(t, salted, wal.HeaderSize, nil)
	if res.stop != wal.StopSalt || int64(res.frames) != k-1 {
		t.Fatalf("salted frame %d: read %d frames, stop %s", k, res.frames, res.stop)
	}
}

func TestInvalidHeader(t *testing.T) {
	b, _ := makeWAL(t, 1)
	for name, mutate := range map[string]func([]byte){
		"magic":    func(h []byte) { h[0] = 0 },
		"checksum": func(h []byte) { h[20] ^= 1 }, // salt-2 changes, stored checksum does not
		"pagesize": func(h []byte) { binary.BigEndian.PutUint32(h[8:], 1000) },
	} {
		h := append([]byte(nil), b[:wal.HeaderSize]...)
		mutate(h)
		if _, err := wal.ParseHeader(h); !errors.Is(err, wal.ErrInvalidHeader) {
			t.Errorf("%s: got %v, want ErrInvalidHeader", name, err)
		}
	}
	if _, err := wal.ReadHeader(bytesAt(b[:10])); err != io.EOF {
		t.Errorf("short header: got %v, want io.EOF", err)
	}
	if _, err := wal.NewReader(bytesAt(b), wal.Header{PageSize: 4096}, 33, wal.Checksum{}); err == nil {
		t.Error("NewReader accepted an offset that is not a frame boundary")
	}
}
