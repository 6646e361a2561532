package embedded

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// The libsql crate's application (rustworker/): its sources travel in the
// bench binary, as worker.js does, and are built with cargo into the tools
// directory's target directory, beside the e2e tests' crate programs that
// share its dependencies.
//
//go:embed rustworker/Cargo.toml rustworker/Cargo.lock rustworker/src/main.rs
var rustWorker embed.FS

const rustWorkerName = "sluice-bench-embedded-worker"

// BuildRustWorker writes the worker's sources under tools (only files that
// changed, so cargo's fingerprints hold) and builds it there; a no-op when
// nothing changed. It returns the program's path.
func BuildRustWorker(ctx context.Context, tools string, out io.Writer) (string, error) {
	src := filepath.Join(tools, "bench-rustworker")
	for _, name := range []string{"Cargo.toml", "Cargo.lock", "src/main.rs"} {
		body, err := rustWorker.ReadFile("rustworker/" + name)
		if err != nil {
			return "", err
		}
		dst := filepath.Join(src, name)
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, body) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, body, 0o644); err != nil {
			return "", err
		}
	}
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		home, _ := os.UserHomeDir()
		cargo = filepath.Join(home, ".cargo", "bin", "cargo") // rustup's, when not on PATH
		if _, serr := os.Stat(cargo); serr != nil {
			return "", fmt.Errorf("-client rust needs cargo (Rust's toolchain) to build the libsql crate's application: %w", err)
		}
	}
	target := filepath.Join(tools, "cargo-target")
	start := time.Now()
	cmd := exec.CommandContext(ctx, cargo, "build", "--release", "-q", "--target-dir", target)
	cmd.Dir = src
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	done := make(chan struct{})
	var said sync.WaitGroup
	said.Add(1)
	go func() { // a long build says so
		defer said.Done()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			fmt.Fprintf(out, "  building the libsql crate's application with cargo in %s (a few minutes the first time)\n", src)
		}
	}()
	err = cmd.Run()
	close(done)
	said.Wait()
	if err != nil {
		return "", fmt.Errorf("cargo build in %s: %v\n%s", src, err, log.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		fmt.Fprintf(out, "  built the libsql crate's application in %s\n", d.Round(time.Second))
	}
	return filepath.Join(target, "release", rustWorkerName), nil
}
