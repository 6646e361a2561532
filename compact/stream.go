package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// errStalled is the cause given to a store call cancelled because it made
// no progress for the configured call timeout.
var errStalled = errors.New("store request made no progress before its deadline")

// watchdog cancels a context when no progress was reported for d. Transfers
// of any size get a deadline that fires only when they stall, so a large
// snapshot on a slow link still completes while a hung connection does not
// hold the pass (and its budget slots) forever.
type watchdog struct {
	t *time.Timer
	d time.Duration
}

func withWatchdog(ctx context.Context, d time.Duration) (context.Context, *watchdog, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{d: d, t: time.AfterFunc(d, func() { cancel(errStalled) })}
	return ctx, w, func() { w.t.Stop(); cancel(nil) }
}

func (w *watchdog) touch() { w.t.Reset(w.d) }

// progressReader reports every successful read to a watchdog.
type progressReader struct {
	r io.Reader
	w *watchdog
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.w.touch()
	}
	return n, err
}

// explain adds the stall cause to an error from a call whose context the
// watchdog cancelled (the store only reports "context canceled").
func explain(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errStalled) {
		return fmt.Errorf("%w (%v)", err, errStalled)
	}
	return err
}

// tempFile creates a scratch file for merge output in dir ("" = the system
// temp directory).
func tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "sluice-compact-*.ltx")
	if err != nil {
		return nil, fmt.Errorf("compact: create a scratch file for merge output: %w", err)
	}
	return f, nil
}

func removeTemp(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}
