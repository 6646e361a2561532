package wal

import (
	"encoding/binary"
	"errors"
	"io"
)

// The wal-index (the -shm file) says which frames SQLite has made visible:
// its header's mxFrame. A frame past mxFrame can be checksum-valid and still
// not committed: a writer that died between writing its commit frame and
// publishing it in the index leaves such frames, and the next writer
// overwrites them. Only frames up to mxFrame may be shipped.

// indexHeaderSize is one copy of the WalIndexHdr; SQLite keeps two, back to
// back, and readers trust them only when both copies agree.
const indexHeaderSize = 48

// ErrIndexBusy means the wal-index header was being rewritten (its two
// copies differ) or describes another WAL generation: read again later.
var ErrIndexBusy = errors.New("wal-index header in flux")

// ReadIndexMaxFrame returns the wal-index's mxFrame for the WAL whose header
// is hdr, read from shm (the -shm file, in this machine's byte order).
func ReadIndexMaxFrame(shm io.ReaderAt, hdr Header) (uint32, error) {
	var b [2 * indexHeaderSize]byte
	if _, err := shm.ReadAt(b[:], 0); err != nil {
		return 0, err
	}
	first, second := b[:indexHeaderSize], b[indexHeaderSize:]
	if string(first) != string(second) || first[12] == 0 { // isInit
		return 0, ErrIndexBusy
	}
	// aSalt holds the WAL header's salt bytes verbatim (big-endian).
	if binary.BigEndian.Uint32(first[32:]) != hdr.Salt1 || binary.BigEndian.Uint32(first[36:]) != hdr.Salt2 {
		return 0, ErrIndexBusy
	}
	return binary.NativeEndian.Uint32(first[16:]), nil
}
