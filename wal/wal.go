// Package wal reads SQLite write-ahead-log files: the 32-byte header and the
// frames that follow it, validating salts and the cumulative checksum chain the
// way SQLite's own recovery does (https://www.sqlite.org/fileformat2.html#walformat).
//
// It imports only the standard library; it knows nothing about LTX or stores.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Sizes of the WAL header and of each frame header.
const (
	HeaderSize      = 32
	FrameHeaderSize = 24
)

// Magic numbers: the low bit selects the byte order of the checksum words.
const (
	MagicLittleEndian = 0x377f0682
	MagicBigEndian    = 0x377f0683
)

// Version is the only WAL format version SQLite writes.
const Version = 3007000

// ErrInvalidHeader reports a WAL header that SQLite itself would ignore
// (bad magic, version, page size or header checksum).
var ErrInvalidHeader = errors.New("invalid WAL header")

// Checksum is the running pair of 32-bit sums of the WAL checksum algorithm.
type Checksum struct{ S1, S2 uint32 }

// Header is a decoded WAL header.
type Header struct {
	Magic         uint32
	Version       uint32
	PageSize      uint32
	CheckpointSeq uint32
	Salt1, Salt2  uint32
	Checksum      Checksum // checksum of the first 24 header bytes; frame 1 chains from it
}

// BigEndian reports whether checksum words are read big-endian.
func (h Header) BigEndian() bool { return h.Magic == MagicBigEndian }

// FrameSize is the size of one frame (header plus page).
func (h Header) FrameSize() int64 { return FrameHeaderSize + int64(h.PageSize) }

// FrameOffset is the byte offset of frame n (1-based).
func (h Header) FrameOffset(n int64) int64 { return HeaderSize + (n-1)*h.FrameSize() }

// SameSalts reports whether two headers belong to the same WAL generation.
func (h Header) SameSalts(o Header) bool { return h.Salt1 == o.Salt1 && h.Salt2 == o.Salt2 }

// ParseHeader decodes and validates a WAL header. A header SQLite would not
// accept returns an error wrapping ErrInvalidHeader.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, need %d", ErrInvalidHeader, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := Header{
		Magic:         be.Uint32(b[0:]),
		Version:       be.Uint32(b[4:]),
		PageSize:      be.Uint32(b[8:]),
		CheckpointSeq: be.Uint32(b[12:]),
		Salt1:         be.Uint32(b[16:]),
		Salt2:         be.Uint32(b[20:]),
		Checksum:      Checksum{be.Uint32(b[24:]), be.Uint32(b[28:])},
	}
	if h.Magic != MagicLittleEndian && h.Magic != MagicBigEndian {
		return Header{}, fmt.Errorf("%w: magic %#08x", ErrInvalidHeader, h.Magic)
	}
	if h.Version != Version {
		return Header{}, fmt.Errorf("%w: version %d", ErrInvalidHeader, h.Version)
	}
	// Unlike the database header, the WAL header is wide enough to hold 65536.
	if h.PageSize < 512 || h.PageSize > 65536 || h.PageSize&(h.PageSize-1) != 0 {
		return Header{}, fmt.Errorf("%w: page size %d", ErrInvalidHeader, h.PageSize)
	}
	if got := Sum(h.BigEndian(), Checksum{}, b[:24]); got != h.Checksum {
		return Header{}, fmt.Errorf("%w: header checksum mismatch", ErrInvalidHeader)
	}
	return h, nil
}

// ReadHeader reads and validates the header at the start of a WAL file. A file
// shorter than a header returns io.EOF: SQLite has not written the log yet (or
// truncated it).
func ReadHeader(r io.ReaderAt) (Header, error) {
	b := make([]byte, HeaderSize)
	n, err := r.ReadAt(b, 0)
	if n < HeaderSize {
		if err == nil || errors.Is(err, io.EOF) {
			return Header{}, io.EOF
		}
		return Header{}, fmt.Errorf("read WAL header: %w", err)
	}
	return ParseHeader(b)
}

// Sum extends the running checksum s over b (whose length must be a multiple
// of 8), reading 32-bit words in the byte order the WAL magic selects.
func Sum(bigEndian bool, s Checksum, b []byte) Checksum {
	var order binary.ByteOrder = binary.LittleEndian
	if bigEndian {
		order = binary.BigEndian
	}
	s1, s2 := s.S1, s.S2
	for i := 0; i+8 <= len(b); i += 8 {
		s1 += order.Uint32(b[i:]) + s2
		s2 += order.Uint32(b[i+4:]) + s1
	}
	return Checksum{s1, s2}
}
