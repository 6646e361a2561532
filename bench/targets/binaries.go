package targets

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SluiceBinary finds the sluice under measurement: $SLUICE_BIN, `sluice`
// beside the running binary (make build puts bin/sluice beside
// bin/sluice-bench), else `sluice` on PATH.
func SluiceBinary() (string, error) {
	if p := os.Getenv("SLUICE_BIN"); p != "" {
		return filepath.Abs(p)
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "sluice"); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("sluice"); err == nil {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("no sluice binary to measure: build it with `make build` (bin/sluice beside bin/sluice-bench), or set SLUICE_BIN")
}

// PeerBinary finds the peer app: $SLUICE_PEERAPP, `sluice-peerapp` beside the
// sluice binary, beside the running binary or on PATH, else it builds bench/peers/peerapp from the source
// tree around the working directory into dir (it needs cgo for go-sqlite3).
func PeerBinary(ctx context.Context, sluiceBin, dir string) (string, error) {
	if p := os.Getenv("SLUICE_PEERAPP"); p != "" {
		return p, nil
	}
	if p := filepath.Join(filepath.Dir(sluiceBin), "sluice-peerapp"); fileExists(p) {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "sluice-peerapp"); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("sluice-peerapp"); err == nil {
		return p, nil
	}
	root, ok := benchModuleRoot()
	if !ok {
		return "", fmt.Errorf("the peer app is not built: run `make build` in sluice's source tree, which writes bin/sluice-peerapp (or set SLUICE_PEERAPP)")
	}
	out := filepath.Join(dir, "sluice-peerapp")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./peers/peerapp")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the peer app in %s: %v\n%s", root, err, b)
	}
	return out, nil
}

// benchModuleRoot walks up from the working directory to the benchmarks'
// go.mod, or to sluice's whose bench/ holds it.
func benchModuleRoot() (string, bool) {
	d, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if isModule(d, "github.com/sluicedb/sluice/bench") {
			return d, true
		}
		if isModule(d, "github.com/sluicedb/sluice") && isModule(filepath.Join(d, "bench"), "github.com/sluicedb/sluice/bench") {
			return filepath.Join(d, "bench"), true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

// isModule reports whether dir's go.mod declares module path.
func isModule(dir, path string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && strings.Contains(string(b), "module "+path+"\n")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
