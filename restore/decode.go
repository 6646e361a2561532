package restore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
	"github.com/sluicedb/sluice/internal/crc64iso"
	"github.com/superfly/ltx"
)

// pageSource yields an LTX file's pages with each page's checksum, and
// verifies the file's checksums at the end.
type pageSource interface {
	header() ltx.Header
	// next decodes the next page into the buffer dst returns for its page
	// number, and returns that number and the page's checksum; io.EOF after
	// the last page.
	next(dst func(pgno uint32) ([]byte, error)) (uint32, ltx.Checksum, error)
	// finish reads the page index and trailer and verifies the file checksum
	// and, for a snapshot carrying checksums, its database checksum.
	finish() (ltx.Trailer, error)
}

// errLegacyFormat: the file's pages are LZ4 frames (LTX before the size
// prefix); ltx.Decoder reads those.
var errLegacyFormat = errors.New("LTX pages without size prefix")

// blockDecoder reads LTX files whose pages are LZ4 blocks with a size
// prefix, the format written today. It runs one CRC pass over each page and
// derives from it both the file checksum and the page checksum (see
// crcShift), where ltx.Decoder runs two.
type blockDecoder struct {
	r        *bufio.Reader
	hdr      ltx.Header
	fileCRC  uint64
	shift    *crcShift
	snapshot ltx.Checksum // XOR of the page checksums, for a snapshot's trailer
	block    []byte
	frame    [ltx.PageHeaderSize + 4]byte
	raw      []byte // the header's bytes
}

// newBlockDecoder reads the header and peeks at the first page: a legacy
// file gives errLegacyFormat having consumed nothing but the header.
func newBlockDecoder(r *bufio.Reader) (*blockDecoder, error) {
	b := make([]byte, ltx.HeaderSize)
	d := &blockDecoder{r: r, raw: b}
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	if err := d.hdr.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	if err := d.hdr.Validate(); err != nil {
		return nil, err
	}
	d.fileCRC = crc64iso.Update(0, b)
	d.shift = shiftFor(int(d.hdr.PageSize))
	peek, err := r.Peek(ltx.PageHeaderSize)
	if err != nil {
		return nil, err
	}
	var ph ltx.PageHeader
	_ = ph.UnmarshalBinary(peek)
	if !ph.IsZero() && ph.Flags&ltx.PageHeaderFlagSize == 0 {
		return d, errLegacyFormat
	}
	return d, nil
}

func (d *blockDecoder) header() ltx.Header { return d.hdr }

func (d *blockDecoder) next(dst func(pgno uint32) ([]byte, error)) (uint32, ltx.Checksum, error) {
	if _, err := io.ReadFull(d.r, d.frame[:ltx.PageHeaderSize]); err != nil {
		return 0, 0, noEOF(err)
	}
	var ph ltx.PageHeader
	_ = ph.UnmarshalBinary(d.frame[:])
	if ph.IsZero() {
		d.fileCRC = crc64iso.Update(d.fileCRC, d.frame[:ltx.PageHeaderSize])
		return 0, 0, io.EOF
	}
	if err := ph.Validate(); err != nil {
		return 0, 0, err
	}
	if ph.Flags&ltx.PageHeaderFlagSize == 0 {
		return 0, 0, fmt.Errorf("page %d: %w after pages with one", ph.Pgno, errLegacyFormat)
	}
	if _, err := io.ReadFull(d.r, d.frame[ltx.PageHeaderSize:]); err != nil {
		return 0, 0, noEOF(err)
	}
	d.fileCRC = crc64iso.Update(d.fileCRC, d.frame[:])
	n := binary.BigEndian.Uint32(d.frame[ltx.PageHeaderSize:])
	if n > uint32(lz4.CompressBlockBound(int(d.hdr.PageSize))) {
		return 0, 0, fmt.Errorf("page %d: compressed size %d exceeds the bound for a %d-byte page", ph.Pgno, n, d.hdr.PageSize)
	}
	if cap(d.block) < int(n) {
		d.block = make([]byte, n)
	}
	block := d.block[:n]
	if _, err := io.ReadFull(d.r, block); err != nil {
		return 0, 0, noEOF(err)
	}
	page, err := dst(ph.Pgno)
	if err != nil {
		return 0, 0, err
	}
	if got, err := lz4.UncompressBlock(block, page); err != nil {
		return 0, 0, fmt.Errorf("page %d: decompress: %w", ph.Pgno, err)
	} else if got != len(page) {
		return 0, 0, fmt.Errorf("page %d: decompressed to %d bytes, want %d", ph.Pgno, got, len(page))
	}
	crcPage := crc64iso.Update(0, page)
	d.fileCRC = crcAppend(d.fileCRC, crcPage, d.shift)
	var pg [4]byte
	binary.BigEndian.PutUint32(pg[:], ph.Pgno)
	sum := ltxSum(crcAppend(crc64iso.Update(0, pg[:]), crcPage, d.shift))
	if ph.Pgno != ltx.LockPgno(d.hdr.PageSize) {
		d.snapshot ^= sum
	}
	return ph.Pgno, sum, nil
}

func (d *blockDecoder) finish() (ltx.Trailer, error) {
	var t ltx.Trailer
	rest, err := io.ReadAll(d.r)
	if err != nil {
		return t, err
	}
	if len(rest) < 8+ltx.TrailerSize {
		return t, fmt.Errorf("%d bytes after the pages: %w", len(rest), io.ErrUnexpectedEOF)
	}
	d.fileCRC = crc64iso.Update(d.fileCRC, rest[:len(rest)-ltx.ChecksumSize])
	idx := bytes.NewReader(rest[:len(rest)-ltx.TrailerSize])
	if _, err := ltx.DecodePageIndex(idx, 0, d.hdr.MinTXID, d.hdr.MaxTXID); err != nil {
		return t, fmt.Errorf("page index: %w", err)
	}
	if idx.Len() != 0 {
		return t, fmt.Errorf("%d stray bytes after the page index", idx.Len())
	}
	if err := t.UnmarshalBinary(rest[len(rest)-ltx.TrailerSize:]); err != nil {
		return t, err
	}
	if ltxSum(d.fileCRC) != t.FileChecksum {
		return t, ltx.ErrChecksumMismatch
	}
	if d.hdr.IsSnapshot() && !d.hdr.NoChecksum() && t.PostApplyChecksum != ltx.ChecksumFlag|d.snapshot {
		return t, fmt.Errorf("database checksum in the trailer %s differs from the pages' %s", t.PostApplyChecksum, ltx.ChecksumFlag|d.snapshot)
	}
	return t, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// legacyDecoder reads files with LZ4-frame pages through ltx.Decoder,
// checksumming each page separately.
type legacyDecoder struct {
	dec  *ltx.Decoder
	page []byte
}

func newLegacyDecoder(r io.Reader) (*legacyDecoder, error) {
	d := &legacyDecoder{dec: ltx.NewDecoder(r)}
	return d, d.dec.DecodeHeader()
}

func (d *legacyDecoder) header() ltx.Header { return d.dec.Header() }

func (d *legacyDecoder) next(dst func(pgno uint32) ([]byte, error)) (uint32, ltx.Checksum, error) {
	if d.page == nil {
		d.page = make([]byte, d.dec.Header().PageSize)
	}
	var ph ltx.PageHeader
	if err := d.dec.DecodePage(&ph, d.page); err != nil {
		return 0, 0, err
	}
	page, err := dst(ph.Pgno)
	if err != nil {
		return 0, 0, err
	}
	copy(page, d.page)
	return ph.Pgno, pageChecksum(ph.Pgno, page), nil
}

func (d *legacyDecoder) finish() (ltx.Trailer, error) {
	if err := d.dec.Close(); err != nil {
		return ltx.Trailer{}, err
	}
	return d.dec.Trailer(), nil
}
