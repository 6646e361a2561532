package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/crc64iso"
	"github.com/sluicedb/sluice/wal"
)

// cursor marks how far the WAL has been captured: the WAL generation (salts),
// the offset just past the last captured commit frame and the running frame
// checksum there. ok=false means no WAL generation has been seen yet (the log
// is empty or truncated).
type cursor struct {
	ok  bool
	hdr wal.Header
	off int64
	sum wal.Checksum
}

func (c cursor) frames() int64 {
	if !c.ok {
		return 0
	}
	return (c.off - wal.HeaderSize) / c.hdr.FrameSize()
}

// dbHeader reads the page size and the in-header page count of a database
// file (the count is 0 if the header says it may be stale).
func dbHeader(f *os.File) (pageSize, pages uint32, err error) {
	b := make([]byte, 100)
	if _, err := f.ReadAt(b, 0); errors.Is(err, io.EOF) {
		return 0, 0, nil // fewer than 100 bytes: no page yet
	} else if err != nil {
		return 0, 0, err
	}
	if string(b[:16]) != "SQLite format 3\x00" {
		return 0, 0, fmt.Errorf("%s is not an SQLite database (bad header)", f.Name())
	}
	pageSize = uint32(binary.BigEndian.Uint16(b[16:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	// The size field is valid only when its version-valid-for number matches
	// the change counter (SQLite >= 3.7.0 always keeps them in step).
	if binary.BigEndian.Uint32(b[24:]) == binary.BigEndian.Uint32(b[92:]) {
		pages = binary.BigEndian.Uint32(b[28:])
	}
	return pageSize, pages, nil
}

// view is a consistent image of the database as of the last commit frame of
// the WAL: pages come from the newest committed frame, else from the DB file.
// It is only valid while a read transaction pins the WAL (see lockedSnapshot).
type view struct {
	dbFile   *os.File
	walFile  *os.File // nil if there is no WAL
	pageSize uint32
	commit   uint32
	index    map[uint32]int64 // pgno -> offset of its newest committed frame
	older    map[uint32]int64 // consulted for pages index lacks (same WAL generation); may be nil
	cur      cursor           // end of the committed WAL
	fh       [wal.FrameHeaderSize]byte
}

// openView scans the whole WAL from its first frame. walFile may be nil.
// committed bounds the frames scanned (see DB.committedFrames); nil: walFile.
func openView(dbFile, walFile *os.File, committed io.ReaderAt) (*view, error) {
	pageSize, pages, err := dbHeader(dbFile)
	if err != nil {
		return nil, err
	}
	v := &view{dbFile: dbFile, walFile: walFile, pageSize: pageSize, index: map[uint32]int64{}}
	if walFile != nil {
		hdr, err := wal.ReadHeader(walFile)
		switch {
		case err == nil:
			if pageSize != 0 && hdr.PageSize != pageSize {
				return nil, fmt.Errorf("WAL %s has page size %d but the database has %d", walFile.Name(), hdr.PageSize, pageSize)
			}
			v.pageSize = hdr.PageSize
			if committed == nil {
				committed = walFile
			}
			r, err := wal.NewReader(committed, hdr, wal.HeaderSize, hdr.Checksum)
			if err != nil {
				return nil, err
			}
			defer r.Release()
			tx := map[uint32]int64{}
			for {
				f, err := r.Next()
				if err == io.EOF {
					break
				} else if err != nil {
					return nil, fmt.Errorf("read WAL %s: %w", walFile.Name(), err)
				}
				tx[f.Pgno] = f.Offset
				if f.Commit != 0 {
					for p, off := range tx {
						v.index[p] = off
					}
					clear(tx)
					v.commit = f.Commit
				}
			}
			v.cur = cursor{ok: true, hdr: hdr, off: r.CommitOffset(), sum: r.CommitChecksum()}
		case errors.Is(err, io.EOF) || errors.Is(err, wal.ErrInvalidHeader):
			// SQLite ignores a log without a valid header; so do we.
		default:
			return nil, fmt.Errorf("read WAL %s: %w", walFile.Name(), err)
		}
	}
	if v.commit == 0 { // nothing committed in the WAL: the DB file is the database
		v.commit = pages
		if v.commit == 0 && pageSize != 0 {
			st, err := dbFile.Stat()
			if err != nil {
				return nil, err
			}
			v.commit = uint32(st.Size() / int64(pageSize))
		}
	}
	return v, nil
}

// readPage reads page pgno into buf (len pageSize). Pages past the end of the
// DB file read as zeros (SQLite treats them the same way).
func (v *view) readPage(pgno uint32, buf []byte) error {
	off, ok := v.index[pgno]
	if !ok && v.older != nil {
		off, ok = v.older[pgno]
	}
	if ok {
		if _, err := v.walFile.ReadAt(buf, off+wal.FrameHeaderSize); err != nil {
			return fmt.Errorf("read page %d from WAL %s at %d: %w", pgno, v.walFile.Name(), off, err)
		}
		// Read the frame header after the page: SQLite writes a frame's header
		// before its page, so old salts seen now mean the page read was not
		// overwritten. New salts mean the log was restarted, which SQLite only
		// does once every frame is in the DB file: read it from there.
		fh := v.fh[:]
		if _, err := v.walFile.ReadAt(fh, off); err != nil {
			return fmt.Errorf("read frame header of page %d from WAL %s at %d: %w", pgno, v.walFile.Name(), off, err)
		}
		if h, _ := wal.ParseFrameHeader(fh); h.Salt1 == v.cur.hdr.Salt1 && h.Salt2 == v.cur.hdr.Salt2 {
			return nil
		}
	}
	n, err := v.dbFile.ReadAt(buf, int64(pgno-1)*int64(v.pageSize))
	if errors.Is(err, io.EOF) {
		clear(buf[n:])
		return nil
	}
	if err != nil {
		return fmt.Errorf("read page %d of %s: %w", pgno, v.dbFile.Name(), err)
	}
	return nil
}

// checksums computes every page's LTX checksum (0 for the lock page).
func (v *view) checksums() ([]ltx.Checksum, error) {
	sums := make([]ltx.Checksum, v.commit)
	buf := make([]byte, v.pageSize)
	lock := ltx.LockPgno(v.pageSize)
	for pgno := uint32(1); pgno <= v.commit; pgno++ {
		if pgno == lock {
			continue
		}
		if err := v.readPage(pgno, buf); err != nil {
			return nil, err
		}
		sums[pgno-1] = pageChecksum(pgno, buf)
	}
	return sums, nil
}

// pageChecksum is ltx.ChecksumPage with the faster CRC and no allocation.
func pageChecksum(pgno uint32, page []byte) ltx.Checksum {
	return ltx.ChecksumFlag | ltx.Checksum(crc64iso.Page(pgno, page))
}

// xorAll folds page checksums; the database checksum is ltx.ChecksumFlag|xorAll.
func xorAll(sums []ltx.Checksum) ltx.Checksum {
	var x ltx.Checksum
	for _, c := range sums {
		x ^= c
	}
	return x
}
