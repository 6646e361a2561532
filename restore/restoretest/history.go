// Package restoretest is test support for restore and compact: it drives a
// real SQLite database through a sequence of states and ships each state to a
// replica.Store as real LTX files, the way sluice's capture does, recording
// the database file's hash at every TXID so tests can check restores exactly.
//
// It imports replica, github.com/superfly/ltx and zombiezen.com/go/sqlite.
// Only _test files import it.
package restoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/superfly/ltx"
	"golang.org/x/sys/unix"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/replica"
)

// History is a real SQLite database (rollback journal, so the file itself is
// the committed state) plus the LTX files shipped from it.
type History struct {
	tb    testing.TB
	Store replica.Store
	Path  string
	// NoChecksum ships files the way Litestream 0.5 does: without database
	// checksums (ltx.HeaderFlagNoChecksum).
	NoChecksum bool
	// SkipHashes leaves Hashes empty (long histories); call RecordHash at the
	// TXIDs a test checks.
	SkipHashes bool

	conn     *sqlite.Conn
	pageSize uint32
	pages    [][]byte // state as last shipped, index pgno-1
	sums     []ltx.Checksum
	pos      ltx.Pos
	mm       []byte       // shared read-only mapping of the database file
	sum      ltx.Checksum // rolling checksum of pages (kept even when NoChecksum)

	Hashes map[ltx.TXID]string    // SHA-256 of the database file after each TXID
	Times  map[ltx.TXID]time.Time // header timestamp of each TXID's file
	Files  []replica.LTXFile      // every file shipped, in order
}

// New creates an empty database in dir.
func New(tb testing.TB, store replica.Store, dir string) *History {
	tb.Helper()
	path := filepath.Join(dir, "source.db")
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	h := &History{tb: tb, Store: store, Path: path, conn: conn,
		Hashes: map[ltx.TXID]string{}, Times: map[ltx.TXID]time.Time{}}
	tb.Cleanup(func() { _ = conn.Close() })
	h.Exec("PRAGMA journal_mode=DELETE")
	h.Exec("PRAGMA synchronous=OFF") // the file's content is what matters, not its durability
	return h
}

// Exec runs one statement.
func (h *History) Exec(query string, args ...any) {
	h.tb.Helper()
	if err := sqlitex.ExecuteTransient(h.conn, query, &sqlitex.ExecOptions{Args: args}); err != nil {
		h.tb.Fatalf("exec %q: %v", query, err)
	}
}

// Script runs several statements in one transaction.
func (h *History) Script(queries string) {
	h.tb.Helper()
	if err := sqlitex.ExecuteScript(h.conn, queries, nil); err != nil {
		h.tb.Fatalf("script: %v", err)
	}
}

// Pos is the position after the last shipped file.
func (h *History) Pos() ltx.Pos { return h.pos }

// Ship encodes the database's changes since the last Ship as one level-0 LTX
// file (a snapshot for TXID 1) stamped with ts, and uploads it.
func (h *History) Ship(ts time.Time) replica.LTXFile {
	h.tb.Helper()
	data, err := h.readDB()
	if err != nil {
		h.tb.Fatalf("read %s: %v", h.Path, err)
	}
	ps := pageSizeOf(data)
	if h.pageSize == 0 {
		h.pageSize = ps
	} else if ps != h.pageSize {
		h.tb.Fatalf("page size changed from %d to %d", h.pageSize, ps)
	}
	commit := uint32(len(data)) / ps
	lock := ltx.LockPgno(ps)
	txid := h.pos.TXID + 1

	// Keep the rolling checksum by XOR-ing out old page checksums and in new
	// ones, as the capture does; only changed pages are hashed.
	post := h.sum
	if txid == 1 {
		post = ltx.ChecksumFlag
	}
	var changed []uint32
	newSums := make([]ltx.Checksum, commit)
	newPages := make([][]byte, commit)
	for pgno := uint32(1); pgno <= commit; pgno++ {
		page := data[(pgno-1)*ps : pgno*ps]
		if int(pgno) <= len(h.pages) {
			newPages[pgno-1] = h.pages[pgno-1]
		}
		if pgno == lock {
			continue
		}
		existed := int(pgno) <= len(h.pages)
		if txid != 1 && existed && bytes.Equal(h.pages[pgno-1], page) {
			newSums[pgno-1] = h.sums[pgno-1]
			continue
		}
		changed = append(changed, pgno)
		newPages[pgno-1] = append(newPages[pgno-1][:0], page...) // a copy: the mapping changes under us
		newSums[pgno-1] = ltx.ChecksumPage(pgno, page)
		if existed && txid != 1 {
			post ^= h.sums[pgno-1]
		}
		post ^= newSums[pgno-1]
	}
	for pgno := commit + 1; int(pgno) <= len(h.pages); pgno++ {
		if pgno != lock {
			post ^= h.sums[pgno-1] // truncated away
		}
	}
	post |= ltx.ChecksumFlag
	h.sum = post

	hdr := ltx.Header{Version: ltx.Version, PageSize: ps, Commit: commit, MinTXID: txid, MaxTXID: txid,
		Timestamp: ts.UnixMilli(), PreApplyChecksum: h.pos.PostApplyChecksum}
	if h.NoChecksum {
		hdr.Flags, hdr.PreApplyChecksum, post = ltx.HeaderFlagNoChecksum, 0, 0
	}
	pages := make([]Page, len(changed))
	for i, pgno := range changed {
		pages[i] = Page{Pgno: pgno, Data: newPages[pgno-1]}
	}
	file := Encode(h.tb, hdr, pages, post)
	f, err := replica.PutLTX(context.Background(), h.Store, 0, txid, txid, file)
	if err != nil {
		h.tb.Fatalf("ship TXID %d: %v", txid, err)
	}
	h.pages, h.sums = newPages, newSums
	h.pos = ltx.Pos{TXID: txid, PostApplyChecksum: post}
	if h.NoChecksum {
		h.pos.PostApplyChecksum = 0
	}
	if !h.SkipHashes {
		sum := sha256.Sum256(data)
		h.Hashes[txid] = hex.EncodeToString(sum[:])
	}
	h.Times[txid] = time.UnixMilli(ts.UnixMilli())
	h.Files = append(h.Files, f)
	return f
}

// readDB returns the database file's current bytes through a shared
// read-only mapping kept across calls: long histories neither copy nor
// allocate the whole file per TXID. The slice is only valid until the next
// write to the database.
func (h *History) readDB() ([]byte, error) {
	st, err := os.Stat(h.Path)
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size > int64(len(h.mm)) {
		if h.mm != nil {
			_ = unix.Munmap(h.mm)
			h.mm = nil
		}
		f, err := os.Open(h.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		n := max(64<<20, 2*size)
		if h.mm, err = unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED); err != nil {
			return nil, err
		}
		h.tb.Cleanup(func() {
			if h.mm != nil {
				_ = unix.Munmap(h.mm)
				h.mm = nil
			}
		})
	}
	return h.mm[:size], nil
}

// RecordHash stores the database file's hash for the last shipped TXID.
func (h *History) RecordHash() {
	h.tb.Helper()
	h.Hashes[h.pos.TXID] = FileHash(h.tb, h.Path)
}

// Page is one page to encode.
type Page struct {
	Pgno uint32
	Data []byte
}

// Encode writes an LTX file with ltx.Encoder (pages in ascending order).
func Encode(tb testing.TB, hdr ltx.Header, pages []Page, post ltx.Checksum) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc, err := ltx.NewEncoder(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	if err := enc.EncodeHeader(hdr); err != nil {
		tb.Fatalf("encode header %+v: %v", hdr, err)
	}
	for _, p := range pages {
		if err := enc.EncodePage(ltx.PageHeader{Pgno: p.Pgno}, p.Data); err != nil {
			tb.Fatalf("encode page %d: %v", p.Pgno, err)
		}
	}
	enc.SetPostApplyChecksum(post)
	if err := enc.Close(); err != nil {
		tb.Fatalf("close encoder: %v", err)
	}
	return buf.Bytes()
}

func pageSizeOf(db []byte) uint32 {
	ps := uint32(binary.BigEndian.Uint16(db[16:18]))
	if ps == 1 {
		return 65536
	}
	return ps
}

// FileHash is the SHA-256 of a file, hex.
func FileHash(tb testing.TB, path string) string {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read %s: %v", path, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// IntegrityCheck fails the test unless PRAGMA integrity_check says ok; it
// returns the row count of table (if table is not empty).
func IntegrityCheck(tb testing.TB, path, table string) int64 {
	tb.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	defer conn.Close()
	var res string
	if err := sqlitex.ExecuteTransient(conn, "PRAGMA integrity_check", &sqlitex.ExecOptions{
		ResultFunc: func(s *sqlite.Stmt) error { res += s.ColumnText(0); return nil },
	}); err != nil {
		tb.Fatalf("integrity_check %s: %v", path, err)
	}
	if res != "ok" {
		tb.Fatalf("integrity_check %s: %s", path, res)
	}
	var n int64
	if table != "" {
		if err := sqlitex.ExecuteTransient(conn, "SELECT count(*) FROM "+table, &sqlitex.ExecOptions{
			ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt64(0); return nil },
		}); err != nil {
			tb.Fatalf("count %s in %s: %v", table, path, err)
		}
	}
	return n
}
