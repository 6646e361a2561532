package engine

import (
	"github.com/sluicedb/sluice/wal"
)

// walRange is the part of the WAL a level-0 file was captured from, recorded
// in the LTX header (WALOffset, WALSize, WALSalt1/2) as Litestream 0.5 records
// it. sluice never reads these fields back; Litestream does, when it takes a
// replica over: it continues from WALOffset+WALSize in the WAL generation
// named by the salts if the frame just before that offset is the same page
// with the same bytes in this file, and otherwise ships a full snapshot as the
// next TXID. A file without them (offset 0) stops Litestream for good: it
// logs "prev WAL offset is less than the header size" and ships nothing.
//
// So every file states where the WAL content it covers ends:
//   - a capture: from its first frame to just past its last commit frame;
//   - a full read of the database (first upload, resync): the whole committed
//     log it read, from the WAL header;
//   - no log at all: the WAL header's offset with zero salts, which no SQLite
//     log has, so that Litestream snapshots instead of guessing.
type walRange struct {
	off, size    int64
	salt1, salt2 uint32
}

// captured is the range from start to the cursor end in end's generation.
func captured(start int64, end cursor) walRange {
	return walRange{off: start, size: end.off - start, salt1: end.hdr.Salt1, salt2: end.hdr.Salt2}
}

// wholeLog is the range a full read of the database up to cur covers.
func wholeLog(cur cursor) walRange {
	if !cur.ok {
		return walRange{off: wal.HeaderSize}
	}
	return captured(wal.HeaderSize, cur)
}

// lastFramePage is the page of the last committed frame the view read (the
// frame just before v.cur.off), or 0 if it read none or the log has been
// restarted over it since. Litestream continues from the recorded offset only
// if this page is in the last file with the frame's bytes, so a file that
// ships only some pages (a resync's difference) ships this one too. Without
// it Litestream 0.5.17 would not just snapshot: with the frame's salts still
// matching, its snapshot reads the log only from the recorded offset and takes
// the pages older frames hold from the database file, which may not have them
// yet.
func (v *view) lastFramePage() (uint32, error) {
	if !v.cur.ok || v.walFile == nil || v.cur.off <= wal.HeaderSize {
		return 0, nil
	}
	fh := v.fh[:]
	if _, err := v.walFile.ReadAt(fh, v.cur.off-v.cur.hdr.FrameSize()); err != nil {
		return 0, err
	}
	h, _ := wal.ParseFrameHeader(fh)
	if h.Salt1 != v.cur.hdr.Salt1 || h.Salt2 != v.cur.hdr.Salt2 || h.Pgno == 0 || h.Pgno > v.commit {
		return 0, nil
	}
	return h.Pgno, nil
}
