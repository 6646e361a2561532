package restore

import (
	"fmt"
	"os"
)

// memoryImageLimit is the largest database built in memory and written with
// one write; larger ones are built in a shared mapping of the temp file so a
// restore never needs the database's size in RAM. A variable so tests can
// exercise both paths.
var memoryImageLimit int64 = 1 << 30

// image is the restored database's bytes, page 1 first.
type image struct {
	buf    []byte
	f      *os.File
	mapped bool
}

func newImage(f *os.File, size int64) (*image, error) {
	if size > memoryImageLimit && mmapSupported {
		if err := f.Truncate(size); err != nil {
			return nil, fmt.Errorf("size temp file %s to %d bytes: %w", f.Name(), size, err)
		}
		buf, err := mapFile(f, size)
		if err != nil {
			return nil, fmt.Errorf("map temp file %s: %w", f.Name(), err)
		}
		return &image{buf: buf, f: f, mapped: true}, nil
	}
	return &image{buf: make([]byte, size), f: f}, nil
}

// flush puts the bytes in the file (not yet fsynced).
func (img *image) flush() error {
	if img.mapped {
		return unmapFile(img.buf)
	}
	if _, err := img.f.WriteAt(img.buf, 0); err != nil {
		return fmt.Errorf("write %s: %w", img.f.Name(), err)
	}
	return nil
}

// release frees a mapping without writing (error paths).
func (img *image) release() {
	if img.mapped && img.buf != nil {
		_ = unmapFile(img.buf)
		img.buf = nil
	}
}
