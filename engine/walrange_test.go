package engine

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/wal"
)

// takeover is what Litestream 0.5 decides when it starts on this WAL with the
// replica's newest level-0 file as its position (db.go, DB.verify):
// "continue" from WALOffset+WALSize, "snapshot" (a full copy as the next
// TXID), or "stuck" (an error on every sync: nothing is ever shipped again).
func takeover(t *testing.T, store replica.Store, walPath string) (string, ltx.Header) {
	t.Helper()
	ctx := context.Background()
	files, err := replica.ListLTX(ctx, store, 0)
	must(t, err)
	rc, err := store.Get(ctx, files[len(files)-1].Key)
	must(t, err)
	data, err := io.ReadAll(rc)
	rc.Close()
	must(t, err)
	dec := ltx.NewDecoder(bytes.NewReader(data))
	must(t, dec.DecodeHeader())
	h := dec.Header()

	w, err := os.Open(walPath)
	must(t, err)
	defer w.Close()
	st, err := w.Stat()
	must(t, err)
	end := h.WALOffset + h.WALSize
	if end > st.Size() {
		return "snapshot", h // "wal truncated by another process"
	}
	hdr, err := wal.ReadHeader(w)
	must(t, err)
	saltMatch := hdr.Salt1 == h.WALSalt1 && hdr.Salt2 == h.WALSalt2
	frameSize := hdr.FrameSize()
	if end == wal.HeaderSize || end-frameSize == wal.HeaderSize {
		if saltMatch {
			return "continue", h
		}
		return "snapshot", h
	}
	if end-frameSize < wal.HeaderSize {
		return "stuck", h // "prev WAL offset is less than the header size"
	}
	frame := make([]byte, frameSize)
	_, err = w.ReadAt(frame, end-frameSize)
	must(t, err)
	fh, _ := wal.ParseFrameHeader(frame)
	if fh.Salt1 != h.WALSalt1 || fh.Salt2 != h.WALSalt2 {
		return "snapshot", h
	}
	buf := make([]byte, h.PageSize)
	for {
		var ph ltx.PageHeader
		if err := dec.DecodePage(&ph, buf); err == io.EOF {
			return "snapshot", h // "last page does not exist in last ltx file"
		} else if err != nil {
			t.Fatal(err)
		}
		if ph.Pgno == fh.Pgno && bytes.Equal(buf, frame[wal.FrameHeaderSize:]) {
			break
		}
	}
	return "continue", h // (with other salts: from the restarted log's first frame)
}

// Every file the capture ships says where in the WAL it ended, so that
// Litestream, taking the replica over on this host, continues from there:
// after plain captures, after a checkpoint, after a first upload of a
// database that differs from the replica, and after a resync whose changed
// pages do not include the log's last frame.
func TestLitestreamCanContinueAfterEveryKindOfFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=0")
	store := newStore(t)
	ctx := context.Background()
	expect := func(what, want string) {
		t.Helper()
		got, h := takeover(t, store, path+"-wal")
		t.Logf("%s: Litestream would %s (WAL offset %d, size %d)", what, got, h.WALOffset, h.WALSize)
		if got != want {
			t.Fatalf("%s: Litestream would %s from the newest file (WAL offset %d, size %d, salts %08x/%08x); want %s",
				what, got, h.WALOffset, h.WALSize, h.WALSalt1, h.WALSalt2, want)
		}
	}

	a.insert(5)
	db := openDB(t, path, store, Options{})
	expect("first upload", "continue")
	for i := 0; i < 5; i++ {
		a.insert(3)
		sync1(t, db)
		expect("capture", "continue")
	}
	must(t, db.Checkpoint(ctx))
	a.insert(2) // restarts the fully backfilled log
	sync1(t, db)
	expect("capture after a checkpoint", "continue")

	// A resync whose difference leaves out the last frame's page: row 1's
	// page changes and changes back, so only the other page differs.
	a.exec("UPDATE t SET v = zeroblob(length(v)) WHERE id = 1")
	sync1(t, db)
	db.mu.Lock()
	db.resyncWhy = "test"
	db.mu.Unlock()
	a.exec("BEGIN")
	a.exec("UPDATE t SET v = randomblob(length(v)) WHERE id = (SELECT max(id) FROM t)")
	a.exec("UPDATE t SET v = randomblob(length(v)) WHERE id = 1")
	a.exec("COMMIT")
	a.exec("UPDATE t SET v = zeroblob(length(v)) WHERE id = 1")
	sync1(t, db)
	if db.Stats().FullReads == 0 {
		t.Fatal("the resync did not run")
	}
	expect("resync", "continue")
	must(t, db.Close(ctx))
	assertReplicaEquals(t, store, path)

	// sluice restarts on a database changed while it was down: the first
	// upload ships every page and records the whole log.
	a.insert(4)
	db = openDB(t, path, store, Options{})
	expect("first upload after a restart", "continue")
	must(t, db.Close(ctx))
	assertReplicaEquals(t, store, path)

	// Without a log, a file records none: Litestream's own log then has other
	// salts and it ships a snapshot rather than guess.
	a.exec("PRAGMA journal_mode=DELETE")
	a.insert(1)
	a.exec("PRAGMA journal_mode=WAL")
	db = openDB(t, path, store, Options{})
	must(t, db.Close(ctx))
	a.insert(1)
	expect("first upload without a log", "snapshot")
}
