package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrStalled is the cause given to a store call cancelled by a Watchdog.
var ErrStalled = errors.New("store request made no progress before its deadline")

// Watchdog cancels a context when no progress was reported for its timeout.
// It gives transfers of any size a deadline that fires only when they stall:
// a large file on a slow link still completes, while a hung connection does
// not hold its caller (and the connection) forever.
type Watchdog struct {
	t *time.Timer
	d time.Duration
}

// WithWatchdog returns a context cancelled (cause ErrStalled) once d passes
// without Touch, and a stop function that releases it.
func WithWatchdog(ctx context.Context, d time.Duration) (context.Context, *Watchdog, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &Watchdog{d: d, t: time.AfterFunc(d, func() { cancel(ErrStalled) })}
	return ctx, w, func() { w.t.Stop(); cancel(nil) }
}

// Touch records progress.
func (w *Watchdog) Touch() { w.t.Reset(w.d) }

// Reader returns r reporting every successful read to w. A seekable r
// (a spooled file, an in-memory body) stays seekable: a store that must
// rewind or sign the body would otherwise copy all of it first.
func (w *Watchdog) Reader(r io.Reader) io.Reader {
	if rs, ok := r.(readSeekerAt); ok {
		return progressReadSeeker{progressReader{r, w}, rs}
	}
	return progressReader{r, w}
}

type readSeekerAt interface {
	io.ReadSeeker
	io.ReaderAt
}

type progressReader struct {
	r io.Reader
	w *Watchdog
}

type progressReadSeeker struct {
	progressReader
	rs readSeekerAt
}

func (p progressReadSeeker) Seek(off int64, whence int) (int64, error) { return p.rs.Seek(off, whence) }

func (p progressReadSeeker) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.rs.ReadAt(b, off)
	if n > 0 {
		p.w.Touch()
	}
	return n, err
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.w.Touch()
	}
	return n, err
}

// Stalled adds the reason to an error from a call whose context a Watchdog
// cancelled (stores only report "context canceled").
func Stalled(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), ErrStalled) {
		return fmt.Errorf("%w (%w)", err, ErrStalled)
	}
	return err
}
