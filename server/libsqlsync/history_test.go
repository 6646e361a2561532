package libsqlsync

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// ltxFile encodes one LTX file changing pages (each filled with its byte).
func ltxFile(t *testing.T, min, max uint64, commit uint32, pages map[uint32]byte) (replica.LTXFile, []byte) {
	t.Helper()
	var buf bytes.Buffer
	enc, err := ltx.NewEncoder(&buf)
	if err != nil {
		t.Fatal(err)
	}
	hdr := ltx.Header{Version: ltx.Version, PageSize: PageSize, Commit: commit, MinTXID: ltx.TXID(min), MaxTXID: ltx.TXID(max), Timestamp: 1}
	if min > 1 {
		hdr.PreApplyChecksum = ltx.ChecksumFlag | 1
	}
	if err := enc.EncodeHeader(hdr); err != nil {
		t.Fatal(err)
	}
	keys := map[uint32][]byte{}
	for p := range pages {
		keys[p] = nil
	}
	var sum ltx.Checksum // a snapshot's (min 1) is checked: every page's
	for _, pgno := range sortedPgnos(keys) {
		data := bytes.Repeat([]byte{pages[pgno]}, PageSize)
		sum ^= ltx.ChecksumPage(pgno, data)
		if err := enc.EncodePage(ltx.PageHeader{Pgno: pgno}, data); err != nil {
			t.Fatal(err)
		}
	}
	if min > 1 {
		sum = 2
	}
	enc.SetPostApplyChecksum(ltx.ChecksumFlag | sum)
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return replica.LTXFile{MinTXID: ltx.TXID(min), MaxTXID: ltx.TXID(max)}, buf.Bytes()
}

func TestHistoryDiffIsEveryChangedPageAtItsNewestVersion(t *testing.T) {
	h := NewHistory(0)
	for _, f := range []struct {
		txid   uint64
		commit uint32
		pages  map[uint32]byte
	}{
		{1, 3, map[uint32]byte{1: 'a', 2: 'a', 3: 'a'}},
		{2, 3, map[uint32]byte{2: 'b'}},
		{3, 4, map[uint32]byte{3: 'c', 4: 'c'}},
		{4, 2, map[uint32]byte{1: 'd', 2: 'd'}}, // shrinks to 2 pages
	} {
		lf, body := ltxFile(t, f.txid, f.txid, f.commit, f.pages)
		h.Shipped("db", lf, body)
	}
	v := h.view("db", 4)
	if v.from != 1 || v.head != 4 {
		t.Fatalf("window %d..%d, want 1..4", v.from, v.head)
	}
	pages, commit, head, ok := h.diff("db", 1)
	if !ok || head != 4 || commit != 2 || len(pages) != 2 || pages[1][0] != 'd' || pages[2][0] != 'd' {
		t.Fatalf("diff after 1: ok=%v head=%d commit=%d pages=%d", ok, head, commit, len(pages))
	}
	if pages, _, _, ok = h.diff("db", 2); !ok || len(pages) != 2 {
		t.Fatalf("diff after 2: %v %d", ok, len(pages))
	}
}

func TestHistoryWindowStartNeverMovesBack(t *testing.T) {
	h := NewHistory(3 * PageSize)
	ship := func(txid uint64, pages map[uint32]byte) {
		lf, body := ltxFile(t, txid, txid, 4, pages)
		h.Shipped("db", lf, body)
	}
	ship(5, map[uint32]byte{1: 1, 2: 1})
	ship(6, map[uint32]byte{1: 2, 2: 2}) // 4 pages kept > 3: TXID 5 leaves the window
	if v := h.view("db", 6); v.from != 6 || v.head != 6 {
		t.Fatalf("window %d..%d, want 6..6", v.from, v.head)
	}
	if _, _, _, ok := h.diff("db", 4); ok {
		t.Fatal("a diff from before the window was answered")
	}
	// A file the engine did not keep (nil body) restarts the window after it.
	h.Shipped("db", replica.LTXFile{MinTXID: 7, MaxTXID: 7}, nil)
	if v := h.view("db", 7); v.from != 8 {
		t.Fatalf("after an unreadable file the window starts at %d, want 8", v.from)
	}
	// The database was seeded past a file that arrives late: ignored.
	ship(7, map[uint32]byte{1: 3})
	if v := h.view("db", 7); v.from != 8 {
		t.Fatalf("a late file moved the window start back to %d", v.from)
	}
	// A recreated database (TXID 1 again) starts over.
	lf, body := ltxFile(t, 1, 1, 1, map[uint32]byte{1: 9})
	h.Shipped("db", lf, body)
	if v := h.view("db", 1); v.from != 1 || v.head != 1 {
		t.Fatalf("recreated database: window %d..%d, want 1..1", v.from, v.head)
	}
}

// What History remembers of clients is trusted only where it cannot stand
// for a client it never saw: generations above the head it started at,
// and generation starts no /info handed out.
func TestHistoryRemembersOnlyWhatItSaw(t *testing.T) {
	h := NewHistory(0)
	h.view("db", 10) // started (a restart) at TXID 10
	h.reach("db", 10, 3, 15)
	if _, ok := h.reachedBy("db", 10, 3); ok {
		t.Fatal("a position in a generation older than the start was trusted: an earlier client may hold it")
	}
	h.reach("db", 12, 3, 15)
	h.reach("db", 12, 3, 14) // another client, same position, older: the oldest wins
	if n, ok := h.reachedBy("db", 12, 3); !ok || n != 14 {
		t.Fatalf("reachedBy(12, 3) = %d %v, want 14", n, ok)
	}
	h.info("db", 13) // a replica bootstrapped at generation 13
	h.end("db", 12, 15)
	if got := h.startOf("db", 13); got != 13 {
		t.Fatalf("generation 13 starts at %d, but /info handed it out: want 13", got)
	}
	h.end("db", 13, 16)
	if got := h.startOf("db", 14); got != 16 {
		t.Fatalf("generation 14 starts at %d, want 16", got)
	}
	if h.info("db", 14) {
		t.Fatal("/info may hand out generation 14, which starts at 16: a replica of an image at 14 would be taken for 16")
	}
	if !h.info("db", 16) {
		t.Fatal("/info may not hand out generation 16")
	}
	h.end("db", 13, 20) // the first end stays
	if got := h.startOf("db", 14); got != 16 {
		t.Fatalf("generation 14 starts at %d after a later end, want 16", got)
	}
}

func TestHistoryStaysWithinItsTotalAcrossDatabases(t *testing.T) {
	h := NewHistory(4 * PageSize) // 4 pages per database, 16 in all
	for i := range 10 {
		db := fmt.Sprintf("db%d", i)
		for txid := uint64(1); txid <= 3; txid++ {
			lf, body := ltxFile(t, txid, txid, 3, map[uint32]byte{1: byte(txid), 2: byte(txid)})
			if txid == 1 {
				lf, body = ltxFile(t, 1, 1, 2, map[uint32]byte{1: 1, 2: 1})
			}
			h.Shipped(db, lf, body)
		}
	}
	if h.total > 16*PageSize {
		t.Fatalf("History holds %d bytes, more than its total of %d", h.total, 16*PageSize)
	}
	sum := 0
	for _, d := range h.dbs {
		if d.bytes > 4*PageSize {
			t.Fatalf("a database holds %d bytes, more than its %d", d.bytes, 4*PageSize)
		}
		sum += d.bytes
	}
	if sum != h.total {
		t.Fatalf("the databases hold %d bytes, the total says %d", sum, h.total)
	}
}

// A window seeded with the file of the position replicas bootstrap at
// answers their next sync with the pages changed since (a diff from that
// position), not the whole database; a seed never replaces a window that
// exists, whose start must not move back.
func TestHistorySeedStartsTheWindowAtThePositionsOwnFile(t *testing.T) {
	h := NewHistory(0)
	_, body := ltxFile(t, 7, 7, 3, map[uint32]byte{3: 'g'})
	h.seed("db", 7, body)
	if v := h.view("db", 7); v.from != 7 || v.head != 7 {
		t.Fatalf("seeded window %d..%d, want 7..7", v.from, v.head)
	}
	lf, next := ltxFile(t, 8, 8, 3, map[uint32]byte{2: 'h'})
	h.Shipped("db", lf, next)
	// A replica bootstrapped at 7 is at frame 1 of generation 7, now
	// inside the window: the answer is the one page changed after 7.
	if v := h.view("db", 8); v.from-1 == 7 {
		t.Fatalf("generation 7 is the window's edge (%d..%d): it would get the whole database", v.from, v.head)
	}
	pages, commit, head, ok := h.diff("db", 7)
	if !ok || head != 8 || commit != 3 || len(pages) != 1 || pages[2][0] != 'h' {
		t.Fatalf("diff after 7: ok=%v head=%d commit=%d pages=%d", ok, head, commit, len(pages))
	}

	// A window that exists is never seeded again, even at an older file.
	_, old := ltxFile(t, 6, 6, 3, map[uint32]byte{1: 'f'})
	h.seed("db", 6, old)
	if v := h.view("db", 8); v.from != 7 {
		t.Fatalf("a seed moved the window's start to %d", v.from)
	}
	// A body that is not the position's own file seeds nothing.
	h2 := NewHistory(0)
	h2.seed("db", 5, body)
	if h2.known("db") {
		t.Fatal("a file of TXID 7 seeded a window at 5")
	}
}
