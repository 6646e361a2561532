package s3

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// memoryLimit is the largest unseekable body buffered in memory; larger ones
// go to a temp file.
const memoryLimit = 8 << 20

// seekable returns r as an io.ReadSeeker with its exact size. The SDK needs one
// over plain HTTP (to sign and checksum the payload) and to rewind on retries.
// Unseekable bodies are buffered: in memory up to memoryLimit, else a temp file.
func seekable(r io.Reader, size int64) (io.ReadSeeker, int64, func(), error) {
	noop := func() {}
	if rs, ok := r.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, 0, noop, err
		}
		end, err := rs.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, 0, noop, err
		}
		if size >= 0 && end-start != size {
			return nil, 0, noop, fmt.Errorf("body is %d bytes, caller declared %d", end-start, size)
		}
		if _, err := rs.Seek(start, io.SeekStart); err != nil {
			return nil, 0, noop, err
		}
		if ra, ok := r.(io.ReaderAt); ok {
			return io.NewSectionReader(ra, start, end-start), end - start, noop, nil
		}
		return io.NewSectionReader(readerAt{rs}, start, end-start), end - start, noop, nil
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, memoryLimit+1))
	if err != nil {
		return nil, 0, noop, err
	}
	if n <= memoryLimit {
		if size >= 0 && n != size {
			return nil, 0, noop, fmt.Errorf("body is %d bytes, caller declared %d", n, size)
		}
		return bytes.NewReader(buf.Bytes()), n, noop, nil
	}
	f, err := os.CreateTemp("", "sluice-s3-upload-*")
	if err != nil {
		return nil, 0, noop, err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err = io.Copy(f, io.MultiReader(&buf, r))
	if err != nil {
		cleanup()
		return nil, 0, noop, err
	}
	if size >= 0 && n != size {
		cleanup()
		return nil, 0, noop, fmt.Errorf("body is %d bytes, caller declared %d", n, size)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, 0, noop, err
	}
	return f, n, cleanup, nil
}

// readerAt adapts a ReadSeeker to ReaderAt (not concurrently: the SDK reads
// the body sequentially).
type readerAt struct{ rs io.ReadSeeker }

func (r readerAt) ReadAt(p []byte, off int64) (int, error) {
	if _, err := r.rs.Seek(off, io.SeekStart); err != nil {
		return 0, err
	}
	return io.ReadFull(r.rs, p)
}
