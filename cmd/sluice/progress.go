package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// progressBar draws a one-line bar on a terminal; elsewhere it stays silent so
// logs and pipes get no carriage returns.
type progressBar struct {
	mu      sync.Mutex
	w       io.Writer
	enabled bool
	last    time.Time
	drawn   bool
}

func newProgressBar(w *os.File, quiet bool) *progressBar {
	return &progressBar{w: w, enabled: isTerminal(w) && !quiet}
}

func (p *progressBar) update(done, total int64) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < 50*time.Millisecond && done < total {
		return
	}
	p.last = time.Now()
	const width = 30
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %s / %s", strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100, formatBytes(done), formatBytes(total))
	p.drawn = true
}

func (p *progressBar) finish(ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// logProgress is a restore's progress for a log (a restore on boot, where
// no terminal watches): one line when the first bytes arrive, naming the
// size, then one every `every` until done. Without it a boot that restores
// a large database says nothing for minutes.
func logProgress(logger *slog.Logger, what, path string, every time.Duration) func(done, total int64) {
	var last time.Time
	return func(done, total int64) {
		now := time.Now()
		switch {
		case last.IsZero():
			logger.Info(what, "db", path, "size", formatBytes(total))
		case now.Sub(last) >= every && done < total:
			percent := int64(0)
			if total > 0 {
				percent = done * 100 / total
			}
			logger.Info(what, "db", path, "done", formatBytes(done), "of", formatBytes(total), "percent", percent)
		default:
			return
		}
		last = now
	}
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func absPath(p string) (string, error) { return filepath.Abs(p) }
