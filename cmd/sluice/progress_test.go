package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A restore's log progress: the size when it starts, then a line per
// interval (never more often), nothing once done.
func TestLogProgressIsThrottled(t *testing.T) {
	var buf bytes.Buffer
	p := logProgress(slog.New(slog.NewTextHandler(&buf, nil)), "restoring on boot", "/data/app.db", 30*time.Millisecond)
	const total = 100 << 20
	p(1<<20, total)
	for i := 2; i < 50; i++ { // well under the interval: one line so far
		p(int64(i)<<20, total)
	}
	if n := strings.Count(buf.String(), "restoring on boot"); n != 1 || !strings.Contains(buf.String(), "size=\"100.0 MiB\"") {
		t.Fatalf("after the first bytes: %d lines\n%s", n, buf.String())
	}
	time.Sleep(40 * time.Millisecond)
	p(60<<20, total)
	if !strings.Contains(buf.String(), "percent=60") {
		t.Fatalf("no progress line after the interval\n%s", buf.String())
	}
	time.Sleep(40 * time.Millisecond)
	p(total, total)
	if n := strings.Count(buf.String(), "restoring on boot"); n != 2 {
		t.Fatalf("%d lines, want 2 (the end is said by the caller)\n%s", n, buf.String())
	}
}
