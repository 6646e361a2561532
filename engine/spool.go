package engine

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// spoolMemory is how much of an encoded LTX file is kept in memory; the rest
// goes to a temporary file. A burst of writes, a first snapshot or a resync
// of a large database then costs disk, not RAM, and the usual small file
// costs no file at all.
const spoolMemory = 4 << 20

// spoolChunk is the largest memory chunk (and the file's write buffer).
const spoolChunk = 256 << 10

// spool holds one encoded LTX file until the store has accepted it (a retry
// sends exactly the same bytes). It is written once, then read any number
// of times.
type spool struct {
	dir, name string
	mem       [][]byte // fixed-size chunks: growing one slice would copy it over and over
	f         *overflow
	w         *bufio.Writer
	size      int64
}

// newSpool keeps its overflow file in dir (the database's directory: the
// system temp directory may be a RAM-backed tmpfs), or in the system temp
// directory when dir has no room (see overflow).
func newSpool(dir, name string) *spool { return &spool{dir: dir, name: name} }

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && s.size+int64(len(p)) <= spoolMemory {
		for rest := p; len(rest) > 0; {
			if len(s.mem) == 0 || len(s.mem[len(s.mem)-1]) == cap(s.mem[len(s.mem)-1]) {
				// Chunks double from 4 KiB: a server's small commits stay cheap.
				c := 4 << 10
				if len(s.mem) > 0 {
					c = min(spoolChunk, 2*cap(s.mem[len(s.mem)-1]))
				}
				s.mem = append(s.mem, make([]byte, 0, c))
			}
			last := &s.mem[len(s.mem)-1]
			k := min(len(rest), cap(*last)-len(*last))
			*last = append(*last, rest[:k]...)
			rest = rest[k:]
		}
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.f == nil {
		f, err := createOverflow(s.dir, s.name)
		if err != nil {
			return 0, s.failed(err)
		}
		s.f, s.w = f, bufio.NewWriterSize(f, spoolChunk)
		for _, c := range s.mem {
			if _, err := s.w.Write(c); err != nil {
				return 0, s.failed(err)
			}
		}
		s.mem = nil
	}
	n, err := s.w.Write(p)
	s.size += int64(n)
	if err != nil {
		return n, s.failed(err)
	}
	return n, nil
}

// finish flushes what is buffered; the spool is then read-only.
func (s *spool) finish() error {
	if s.w == nil {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return s.failed(err)
	}
	s.w = nil
	return nil
}

func (s *spool) ReadAt(p []byte, off int64) (int, error) {
	if s.f != nil {
		return s.f.file.ReadAt(p, off)
	}
	n := 0
	for _, c := range s.mem {
		if n == len(p) {
			break
		}
		if off >= int64(len(c)) {
			off -= int64(len(c))
			continue
		}
		n += copy(p[n:], c[off:])
		off = 0
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// smallSpool is the largest spool small returns.
const smallSpool = 64 << 10

// small returns the whole file when it is in memory and at most
// smallSpool bytes, else nil. The bytes stay valid after close.
func (s *spool) small() []byte {
	if s.f != nil || s.size == 0 || s.size > smallSpool {
		return nil
	}
	if len(s.mem) == 1 {
		return s.mem[0]
	}
	b := make([]byte, 0, s.size)
	for _, c := range s.mem {
		b = append(b, c...)
	}
	return b
}

// reader reads the whole file from its start; each call gets its own.
func (s *spool) reader() *io.SectionReader { return io.NewSectionReader(s, 0, s.size) }

// close releases the memory or the temporary file.
func (s *spool) close() {
	if s.f != nil {
		_ = s.f.file.Close()
		s.f = nil
	}
	s.mem, s.w = nil, nil
}

// failed wraps an error of the spool's own file in ErrLocalDisk: the local
// disk, not the replica, is what keeps the file from shipping.
func (s *spool) failed(err error) error {
	return fmt.Errorf("%w: spool the LTX file of %s: %w", ErrLocalDisk, s.name, err)
}

// overflow is the spool's temporary file, unlinked at once (nothing is left
// behind by a crash). It starts beside the database; when that disk refuses
// it (full, read-only, over quota) it moves to the system temp directory
// with what it holds: commits the application already made must still
// reach the replica while its disk has no room for anything.
type overflow struct {
	file    *os.File
	name    string // the database's path, for the file's name
	written int64
	moved   bool // in the system temp directory already
}

func createOverflow(dir, name string) (*overflow, error) {
	o := &overflow{name: name}
	f, err := o.create(dir)
	if err != nil {
		f, err = o.create(os.TempDir())
		if err != nil {
			return nil, err
		}
		o.moved = true
	}
	o.file = f
	return o, nil
}

func (o *overflow) create(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "."+filepath.Base(o.name)+"-sluice-spool-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	return f, nil
}

func (o *overflow) Write(p []byte) (int, error) {
	n, err := o.file.Write(p)
	o.written += int64(n)
	if err == nil || o.moved {
		return n, err
	}
	if merr := o.moveToTemp(); merr != nil {
		return n, fmt.Errorf("%w (and in %s: %w)", err, os.TempDir(), merr)
	}
	m, err := o.file.Write(p[n:])
	o.written += int64(m)
	return n + m, err
}

// moveToTemp copies what was written to a new file in the system temp
// directory and continues there.
func (o *overflow) moveToTemp() error {
	f, err := o.create(os.TempDir())
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.NewSectionReader(o.file, 0, o.written)); err != nil {
		_ = f.Close()
		return err
	}
	_ = o.file.Close()
	o.file, o.moved = f, true
	return nil
}
