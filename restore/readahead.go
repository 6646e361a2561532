package restore

import (
	"io"
	"sync"
)

// readAhead reads its source on its own goroutine into a few fixed chunks, so
// receiving (TLS, syscalls) overlaps decoding. Memory: readAheadChunks chunks.
type readAhead struct {
	full  chan chunk
	free  chan []byte
	stop  chan struct{}
	once  sync.Once
	cur   chunk
	pos   int
	final error
}

type chunk struct {
	b   []byte
	err error
}

const (
	readAheadChunk  = 256 << 10
	readAheadChunks = 4
)

func newReadAhead(r io.Reader) *readAhead {
	ra := &readAhead{full: make(chan chunk, readAheadChunks), free: make(chan []byte, readAheadChunks), stop: make(chan struct{})}
	for range readAheadChunks {
		ra.free <- getBuf(&readAheadPool, readAheadChunk)
	}
	go func() {
		defer ra.recycle()
		for {
			var buf []byte
			select {
			case buf = <-ra.free:
			case <-ra.stop:
				return
			}
			n, err := io.ReadAtLeast(r, buf, len(buf))
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			select {
			case ra.full <- chunk{b: buf[:n], err: err}:
			case <-ra.stop:
				putBuf(&readAheadPool, buf[:cap(buf)])
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ra
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for ra.pos == len(ra.cur.b) {
		if ra.final != nil {
			return 0, ra.final
		}
		if ra.cur.b != nil {
			ra.free <- ra.cur.b[:cap(ra.cur.b)]
		}
		ra.cur, ra.pos = <-ra.full, 0
		if ra.cur.err != nil {
			ra.final = ra.cur.err
		}
	}
	n := copy(p, ra.cur.b[ra.pos:])
	ra.pos += n
	return n, nil
}

// Close stops the reading goroutine; the caller closes the source, which
// unblocks a read in progress.
func (ra *readAhead) Close() error {
	ra.once.Do(func() { close(ra.stop) })
	return nil
}

// recycle returns the free chunks to the pool as the reading goroutine ends;
// chunks still with the reader are left to the garbage collector.
func (ra *readAhead) recycle() {
	for {
		select {
		case b := <-ra.free:
			putBuf(&readAheadPool, b[:cap(b)])
		default:
			return
		}
	}
}

// Buffers are reused across the files of a restore (and across restores):
// a plan of hundreds of small files would otherwise allocate and clear
// megabytes per file.
var readAheadPool, runBufPool sync.Pool

func getBuf(p *sync.Pool, size int) []byte {
	if b, ok := p.Get().(*[]byte); ok && cap(*b) >= size {
		return (*b)[:size]
	}
	return make([]byte, size)
}

func putBuf(p *sync.Pool, b []byte) { p.Put(&b) }
