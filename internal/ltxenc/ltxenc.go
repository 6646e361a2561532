// Package ltxenc writes LTX files byte for byte as superfly/ltx's Encoder
// does, but reuses its compression state from one file to the next.
//
// ltx.NewEncoder allocates an LZ4 hash table (about 200 KiB) for every file,
// and a busy server writes a file per upload: that garbage was most of what
// the collector had to clean, and the heap headroom it needs is most of the
// server's memory. An Encoder from New is returned with Release and reused.
package ltxenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/pierrec/lz4/v4"
	"github.com/sluicedb/sluice/internal/crc64iso"
	"github.com/superfly/ltx"
)

// Encoder writes one LTX file: EncodeHeader, EncodePage for each page in
// ascending page order, then Close.
type Encoder struct {
	w        io.Writer
	hdr      ltx.Header
	trailer  ltx.Trailer
	hash     crc64iso.Digest
	n        int64 // bytes written
	started  bool  // the header is written
	closed   bool
	prevPgno uint32
	index    []indexEntry // in page order, as pages must arrive

	comp    lz4.Compressor
	compBuf []byte
	scratch [ltx.PageHeaderSize + 4]byte
	idxBuf  []byte
}

type indexEntry struct {
	pgno         uint32
	offset, size int64
}

// keepIndexEntries bounds the page index a released Encoder keeps.
const keepIndexEntries = 4096

var pool = sync.Pool{New: func() any {
	return &Encoder{}
}}

// New returns an encoder writing to w, reusing a released one's buffers.
func New(w io.Writer) *Encoder {
	e := pool.Get().(*Encoder)
	e.w = w
	return e
}

// Release returns e for reuse; e must not be used afterwards.
func (e *Encoder) Release() {
	e.w = nil
	e.hdr, e.trailer = ltx.Header{}, ltx.Trailer{}
	e.hash.Reset()
	e.n, e.started, e.closed, e.prevPgno = 0, false, false, 0
	e.index = e.index[:0]
	// A snapshot of a large database leaves megabytes of index behind:
	// keep only what a typical upload needs.
	if cap(e.index) > keepIndexEntries {
		e.index, e.idxBuf = nil, nil
	}
	pool.Put(e)
}

// N is the number of bytes written so far.
func (e *Encoder) N() int64 { return e.n }

// Trailer is the file's trailer; its file checksum is set by Close.
func (e *Encoder) Trailer() ltx.Trailer { return e.trailer }

// SetPostApplyChecksum sets the checksum of the database after the file is
// applied; only for files without the no-checksum flag, before Close.
func (e *Encoder) SetPostApplyChecksum(c ltx.Checksum) { e.trailer.PostApplyChecksum = c }

// EncodeHeader writes the header; it must come first, once.
func (e *Encoder) EncodeHeader(hdr ltx.Header) error {
	switch {
	case e.closed:
		return ltx.ErrEncoderClosed
	case e.started:
		return errors.New("LTX header already written")
	}
	if err := hdr.Validate(); err != nil {
		return err
	}
	b, err := hdr.MarshalBinary()
	if err != nil {
		return fmt.Errorf("marshal header: %w", err)
	}
	e.hdr, e.started = hdr, true
	return e.write(b)
}

// EncodePage compresses and writes one page. Pages come in ascending page
// order; a snapshot holds every page from 1 to its commit size but the
// lock page.
func (e *Encoder) EncodePage(hdr ltx.PageHeader, data []byte) error {
	if err := e.checkPage(hdr, data); err != nil {
		return err
	}
	if len(e.compBuf) < lz4.CompressBlockBound(len(data)) {
		e.compBuf = make([]byte, lz4.CompressBlockBound(len(data)))
	}
	n, err := e.comp.CompressBlock(data, e.compBuf)
	if err != nil {
		return fmt.Errorf("compress page data: %w", err)
	}
	if n == 0 {
		return errors.New("lz4 block compression failed")
	}
	offset := e.n
	binary.BigEndian.PutUint32(e.scratch[0:], hdr.Pgno)
	binary.BigEndian.PutUint16(e.scratch[4:], hdr.Flags|ltx.PageHeaderFlagSize)
	binary.BigEndian.PutUint32(e.scratch[ltx.PageHeaderSize:], uint32(n))
	if err := e.write(e.scratch[:]); err != nil {
		return fmt.Errorf("write page header: %w", err)
	}
	// The checksum covers the page as stored in the database, not its
	// compressed form.
	if _, err := e.w.Write(e.compBuf[:n]); err != nil {
		return fmt.Errorf("write page data: %w", err)
	}
	e.hash.Write(data)
	e.n += int64(n)
	e.prevPgno = hdr.Pgno
	e.index = append(e.index, indexEntry{pgno: hdr.Pgno, offset: offset, size: e.n - offset})
	return nil
}

func (e *Encoder) checkPage(hdr ltx.PageHeader, data []byte) error {
	switch {
	case e.closed:
		return ltx.ErrEncoderClosed
	case !e.started:
		return errors.New("cannot encode a page before the LTX header")
	case hdr.Pgno > e.hdr.Commit:
		return fmt.Errorf("page number %d out-of-bounds for commit size %d", hdr.Pgno, e.hdr.Commit)
	case uint32(len(data)) != e.hdr.PageSize:
		return fmt.Errorf("invalid page buffer size: %d, expecting %d", len(data), e.hdr.PageSize)
	}
	if err := hdr.Validate(); err != nil {
		return err
	}
	lock := ltx.LockPgno(e.hdr.PageSize)
	if hdr.Pgno == lock {
		return fmt.Errorf("cannot encode lock page: pgno=%d", hdr.Pgno)
	}
	if !e.hdr.IsSnapshot() {
		if e.prevPgno >= hdr.Pgno {
			return fmt.Errorf("out-of-order page numbers: %d,%d", e.prevPgno, hdr.Pgno)
		}
		return nil
	}
	want := e.prevPgno + 1
	if want == lock {
		want++
	}
	if hdr.Pgno != want {
		return fmt.Errorf("nonsequential page numbers in snapshot transaction: %d,%d", e.prevPgno, hdr.Pgno)
	}
	return nil
}

// Close writes the end of the page block, the page index and the trailer.
func (e *Encoder) Close() error {
	if e.closed {
		return nil
	}
	if !e.started {
		return errors.New("cannot close an LTX file without a header")
	}
	clear(e.scratch[:ltx.PageHeaderSize])
	if err := e.write(e.scratch[:ltx.PageHeaderSize]); err != nil {
		return fmt.Errorf("write empty page header: %w", err)
	}
	if err := e.writeIndex(); err != nil {
		return fmt.Errorf("write page index: %w", err)
	}
	b, _ := e.trailer.MarshalBinary()
	e.hash.Write(b[:ltx.TrailerChecksumOffset])
	e.trailer.FileChecksum = ltx.ChecksumFlag | ltx.Checksum(e.hash.Sum64())
	if err := e.trailer.Validate(e.hdr); err != nil {
		return fmt.Errorf("validate trailer: %w", err)
	}
	if e.hdr.Commit == 0 && e.trailer.PostApplyChecksum != ltx.ChecksumFlag {
		return errors.New("post-apply checksum must be empty for zero-length database")
	}
	b, _ = e.trailer.MarshalBinary()
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("write trailer: %w", err)
	}
	e.n += int64(len(b))
	e.closed = true
	return nil
}

// writeIndex writes the page index: (pgno, offset, size) varints per page,
// a zero, then the index's size.
func (e *Encoder) writeIndex() error {
	b := e.idxBuf[:0]
	for _, x := range e.index {
		b = binary.AppendUvarint(b, uint64(x.pgno))
		b = binary.AppendUvarint(b, uint64(x.offset))
		b = binary.AppendUvarint(b, uint64(x.size))
	}
	b = binary.AppendUvarint(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(len(b)))
	e.idxBuf = b
	return e.write(b)
}

// write writes b and adds it to the file checksum.
func (e *Encoder) write(b []byte) error {
	n, err := e.w.Write(b)
	e.hash.Write(b[:n])
	e.n += int64(n)
	return err
}
