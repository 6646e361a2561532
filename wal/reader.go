package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Frame is one WAL frame. Data aliases the Reader's buffer and is valid only
// until the next call to Next; copy it to keep it.
type Frame struct {
	Offset int64  // byte offset of the frame header in the WAL file
	Pgno   uint32 // page number
	Commit uint32 // database size in pages after this commit; 0 unless a commit frame
	Data   []byte // the page
}

// StopReason says why a Reader stopped returning frames.
type StopReason int

// Reasons a Reader stops; none of them is an error: SQLite's recovery stops at
// the same places and ignores everything after.
const (
	StopNone     StopReason = iota // still reading
	StopEOF                        // the file ends (possibly mid-frame)
	StopSalt                       // a frame from an older WAL generation
	StopChecksum                   // the checksum chain breaks
)

func (r StopReason) String() string {
	switch r {
	case StopEOF:
		return "end of file"
	case StopSalt:
		return "salt mismatch"
	case StopChecksum:
		return "checksum mismatch"
	}
	return "none"
}

// Reader returns the valid frames of a WAL file in order, starting at a known
// frame boundary with the running checksum at that point.
type Reader struct {
	r   io.ReaderAt
	hdr Header

	off  int64    // offset of the next frame
	sum  Checksum // running checksum after the frame before off
	stop StopReason

	// Frames are read ahead, several per system call: a capture under a
	// busy writer reads tens of thousands of frames a second. The buffer
	// starts at one frame and doubles up to maxReadAhead frames, so short
	// reads stay cheap.
	buf    []byte
	bufOff int64 // file offset of buf[0]
	bufLen int   // valid bytes in buf

	commitOff int64 // offset just past the last commit frame returned
	commitSum Checksum
	commit    uint32 // its database size
}

// NewReader reads frames of the WAL described by hdr from offset, which must be
// a frame boundary (HeaderSize for the first frame) whose preceding running
// checksum is sum (hdr.Checksum for the first frame).
func NewReader(r io.ReaderAt, hdr Header, offset int64, sum Checksum) (*Reader, error) {
	if offset < HeaderSize || (offset-HeaderSize)%hdr.FrameSize() != 0 {
		return nil, fmt.Errorf("WAL offset %d is not a frame boundary for page size %d", offset, hdr.PageSize)
	}
	return &Reader{
		r: r, hdr: hdr, off: offset, sum: sum,
		commitOff: offset, commitSum: sum,
	}, nil
}

// Next returns the next valid frame, or io.EOF once the frames end (see
// Stopped for why). Other errors are I/O errors from the underlying file.
func (r *Reader) Next() (Frame, error) {
	if r.stop != StopNone {
		return Frame{}, io.EOF
	}
	size := r.hdr.FrameSize()
	if r.off < r.bufOff || r.off+size > r.bufOff+int64(r.bufLen) {
		if err := r.fill(); err != nil {
			return Frame{}, err
		}
	}
	frame := r.buf[r.off-r.bufOff : r.off-r.bufOff+size]
	be := binary.BigEndian
	fh := frame[:FrameHeaderSize]
	if be.Uint32(fh[8:]) != r.hdr.Salt1 || be.Uint32(fh[12:]) != r.hdr.Salt2 {
		r.stop = StopSalt
		return Frame{}, io.EOF
	}
	sum := Sum(r.hdr.BigEndian(), r.sum, fh[:8])
	sum = Sum(r.hdr.BigEndian(), sum, frame[FrameHeaderSize:])
	if sum != (Checksum{be.Uint32(fh[16:]), be.Uint32(fh[20:])}) {
		r.stop = StopChecksum
		return Frame{}, io.EOF
	}
	f := Frame{
		Offset: r.off,
		Pgno:   be.Uint32(fh[0:]),
		Commit: be.Uint32(fh[4:]),
		Data:   frame[FrameHeaderSize:],
	}
	if f.Pgno == 0 {
		// SQLite never writes page 0; treat it like a broken chain.
		r.stop = StopChecksum
		return Frame{}, io.EOF
	}
	r.sum = sum
	r.off += size
	if f.Commit != 0 {
		r.commitOff, r.commitSum, r.commit = r.off, sum, f.Commit
	}
	return f, nil
}

// readBufs holds released readers' buffers: a server captures hundreds of
// times a second, and a fresh read-ahead buffer each time was a large share
// of its garbage.
var readBufs sync.Pool // of *[]byte

// Release hands the reader's buffer to the next reader; r must not be used
// afterwards.
func (r *Reader) Release() {
	if r.buf != nil {
		b := r.buf
		r.buf, r.bufLen = nil, 0
		readBufs.Put(&b)
	}
}

// maxReadAhead is the most frames one read fetches.
const maxReadAhead = 64

// fill reads frames from r.off into the buffer; io.EOF (with StopEOF) when
// not even one whole frame is left.
func (r *Reader) fill() error {
	size := r.hdr.FrameSize()
	if want := min(max(2*len(r.buf), int(size)), maxReadAhead*int(size)); want > len(r.buf) {
		if r.buf == nil {
			if p, ok := readBufs.Get().(*[]byte); ok {
				r.buf = (*p)[:cap(*p)]
			}
		}
		if want > len(r.buf) {
			r.buf = make([]byte, want)
		}
	}
	n, err := r.r.ReadAt(r.buf, r.off)
	r.bufOff, r.bufLen = r.off, n
	if int64(n) < size {
		r.bufLen = 0
		if err == nil || errors.Is(err, io.EOF) {
			r.stop = StopEOF
			return io.EOF
		}
		return fmt.Errorf("read WAL frame at offset %d: %w", r.off, err)
	}
	return nil
}

// Stopped says why Next returned io.EOF (StopNone while frames remain).
func (r *Reader) Stopped() StopReason { return r.stop }

// Offset is the offset of the next frame to read.
func (r *Reader) Offset() int64 { return r.off }

// CommitOffset is the offset just past the last commit frame returned so far
// (the start offset if none): the end of the committed part of the log.
func (r *Reader) CommitOffset() int64 { return r.commitOff }

// CommitChecksum is the running checksum at CommitOffset.
func (r *Reader) CommitChecksum() Checksum { return r.commitSum }

// CommitSize is the database size in pages of the last commit frame returned,
// 0 if none was.
func (r *Reader) CommitSize() uint32 { return r.commit }

// FrameHeader is a decoded 24-byte frame header.
type FrameHeader struct {
	Pgno, Commit uint32
	Salt1, Salt2 uint32
	Checksum     Checksum
}

// ParseFrameHeader decodes a frame header without validating it.
func ParseFrameHeader(b []byte) (FrameHeader, error) {
	if len(b) < FrameHeaderSize {
		return FrameHeader{}, fmt.Errorf("WAL frame header: %d bytes, need %d", len(b), FrameHeaderSize)
	}
	be := binary.BigEndian
	return FrameHeader{
		Pgno: be.Uint32(b[0:]), Commit: be.Uint32(b[4:]),
		Salt1: be.Uint32(b[8:]), Salt2: be.Uint32(b[12:]),
		Checksum: Checksum{be.Uint32(b[16:]), be.Uint32(b[20:])},
	}, nil
}
