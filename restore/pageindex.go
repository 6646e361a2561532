package restore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// indexTail is how much of a file's end is read at first to find its page
// index: most indexes fit, larger ones take one more read of exact size.
const indexTail = 64 << 10

// readPageNumbers returns the page numbers listed in the page index at the
// end of file (page index, then its 8-byte size, then the trailer), read with
// range reads, so restore knows which file holds the newest copy of each page
// before downloading any body. The file's checksum, which also covers the
// index, is verified when the whole file is streamed later. A file no larger
// than indexTail is read whole, and returned so it need not be downloaded twice.
func readPageNumbers(ctx context.Context, store replica.Store, file replica.LTXFile, fn func(pgno uint32)) (whole []byte, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("LTX file %s in %s has a damaged page index (%s): restore to a TXID before %s, or from another replica",
			file.Key, store, fmt.Sprintf(format, args...), file.MinTXID)
	}
	const foot = 8 + ltx.TrailerSize
	if file.Size < ltx.HeaderSize+foot {
		return nil, bad("file is %d bytes", file.Size)
	}
	tail, err := readRange(ctx, store, file, max(file.Size-indexTail, 0), min(file.Size, indexTail))
	if err != nil {
		return nil, err
	}
	if int64(len(tail)) == file.Size {
		whole = tail
	}
	n := binary.BigEndian.Uint64(tail[len(tail)-foot:])
	if n == 0 || n > uint64(file.Size-ltx.HeaderSize-foot) {
		return nil, bad("index size %d", n)
	}
	var idx []byte
	if int(n)+foot <= len(tail) {
		idx = tail[len(tail)-foot-int(n) : len(tail)-foot]
	} else if idx, err = readRange(ctx, store, file, file.Size-foot-int64(n), int64(n)); err != nil {
		return nil, err
	}
	r := bytes.NewReader(idx)
	for {
		pgno, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, bad("page number: %v", err)
		}
		if pgno == 0 {
			return whole, nil
		}
		if pgno > 1<<32-1 {
			return nil, bad("page number %d", pgno)
		}
		for range 2 { // offset, size
			if _, err := binary.ReadUvarint(r); err != nil {
				return nil, bad("entry of page %d: %v", pgno, err)
			}
		}
		fn(uint32(pgno))
	}
}

func readRange(ctx context.Context, store replica.Store, file replica.LTXFile, off, n int64) ([]byte, error) {
	rc, err := store.GetRange(ctx, file.Key, off, n)
	if err != nil {
		return nil, fmt.Errorf("read page index of %s from %s: %w", file.Key, store, err)
	}
	defer rc.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, fmt.Errorf("read page index of %s from %s (bytes %d..%d of %d): %w", file.Key, store, off, off+n, file.Size, err)
	}
	return b, nil
}
