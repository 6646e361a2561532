package testenv

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logger returns a logger writing each record at level or above to t.Log,
// so a test's logs show only when it fails (or with -v).
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// Output collects what goroutines write (a child's stdout and stderr, a
// logger's records) for a test to read while they run.
type Output struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
