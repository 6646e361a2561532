package testenv

import (
	"log/slog"
	"strings"
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
