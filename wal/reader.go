package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
	buf  []byte
	stop StopReason

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
		buf:       make([]byte, hdr.FrameSize()),
		commitOff: offset, commitSum: sum,
	}, nil
}

// Next returns the next valid frame, or io.EOF once the frames end (see
// Stopped for why). Other errors are I/O errors from the underlying file.
func (r *Reader) Next() (Frame, error) {
	if r.stop != StopNone {
		return Frame{}, io.EOF
	}
	n, err := r.r.ReadAt(r.buf, r.off)
	if n < len(r.buf) {
		if err == nil || errors.Is(err, io.EOF) {
			r.stop = StopEOF
			return Frame{}, io.EOF
		}
		return Frame{}, fmt.Errorf("read WAL frame at offset %d: %w", r.off, err)
	}
	be := binary.BigEndian
	fh := r.buf[:FrameHeaderSize]
	if be.Uint32(fh[8:]) != r.hdr.Salt1 || be.Uint32(fh[12:]) != r.hdr.Salt2 {
		r.stop = StopSalt
		return Frame{}, io.EOF
	}
	sum := Sum(r.hdr.BigEndian(), r.sum, fh[:8])
	sum = Sum(r.hdr.BigEndian(), sum, r.buf[FrameHeaderSize:])
	if sum != (Checksum{be.Uint32(fh[16:]), be.Uint32(fh[20:])}) {
		r.stop = StopChecksum
		return Frame{}, io.EOF
	}
	f := Frame{
		Offset: r.off,
		Pgno:   be.Uint32(fh[0:]),
		Commit: be.Uint32(fh[4:]),
		Data:   r.buf[FrameHeaderSize:],
	}
	if f.Pgno == 0 {
		// SQLite never writes page 0; treat it like a broken chain.
		r.stop = StopChecksum
		return Frame{}, io.EOF
	}
	r.sum = sum
	r.off += int64(len(r.buf))
	if f.Commit != 0 {
		r.commitOff, r.commitSum, r.commit = r.off, sum, f.Commit
	}
	return f, nil
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
