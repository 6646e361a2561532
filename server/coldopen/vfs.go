package coldopen

import (
	"io"
	"io/fs"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite/vfs"
)

// SQLite reads a view through one read-only VFS (modernc.org/sqlite/vfs,
// over a Go fs.FS) registered once per process; each view is a file name in
// it. The VFS only reads: it has no shared memory, journal or WAL, so the
// views present their database in rollback-journal mode (see page) and are
// opened immutable.
var (
	vfsOnce sync.Once
	vfsName string
	vfsErr  error
	views   sync.Map // file name → *View
)

func registerVFS() (string, error) {
	vfsOnce.Do(func() { vfsName, _, vfsErr = vfs.New(viewFS{}) })
	return vfsName, vfsErr
}

// viewFS opens the registered views by name; anything else (a journal, a
// WAL) does not exist.
type viewFS struct{}

func (viewFS) Open(name string) (fs.File, error) {
	v, ok := views.Load(strings.TrimPrefix(name, "/"))
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &file{v: v.(*View)}, nil
}

// file is one connection's handle on a view: SQLite seeks, then reads.
type file struct {
	v   *View
	off int64
}

func (f *file) Stat() (fs.FileInfo, error) { return info{f.v}, nil }
func (f *file) Close() error               { return nil }

func (f *file) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.off = off
	case io.SeekCurrent:
		f.off += off
	case io.SeekEnd:
		f.off = f.v.pages.Size() + off
	}
	return f.off, nil
}

// Read fills b from the pages it spans; a read past the end is short with no
// error (SQLite zero-fills it), a page that cannot be fetched an error
// (SQLite's disk I/O error, which fails the statement and nothing else).
func (f *file) Read(b []byte) (int, error) {
	ps := int64(f.v.pages.PageSize())
	size := f.v.pages.Size()
	n := 0
	for n < len(b) && f.off < size {
		page, err := f.v.page(uint32(f.off/ps) + 1)
		if err != nil {
			return n, err
		}
		c := copy(b[n:], page[f.off%ps:])
		n += c
		f.off += int64(c)
	}
	return n, nil
}

type info struct{ v *View }

func (i info) Name() string       { return i.v.file }
func (i info) Size() int64        { return i.v.pages.Size() }
func (i info) Mode() fs.FileMode  { return 0o444 }
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return false }
func (i info) Sys() any           { return nil }
