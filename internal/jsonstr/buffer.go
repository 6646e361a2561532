package jsonstr

import "sync"

// buffers keeps answer buffers between requests, for every protocol that
// encodes its answers by hand. One that grew past maxPooledBuffer (a huge
// result) is left to the collector.
var buffers = sync.Pool{New: func() any { return make([]byte, 0, 32<<10) }}

const maxPooledBuffer = 1 << 20

// GetBuffer returns an empty buffer to append an answer to.
func GetBuffer() []byte { return buffers.Get().([]byte)[:0] }

// PutBuffer gives b back once the answer it holds is written.
func PutBuffer(b []byte) {
	if cap(b) > 0 && cap(b) <= maxPooledBuffer {
		// Boxing the slice header costs one small allocation per answer, beside
		// the 32 KiB buffer it saves; callers hold a []byte, not a pointer.
		//lint:ignore SA6002 see above
		buffers.Put(b[:0])
	}
}
