package targets

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// PeerBinary finds the peer app: $SLUICE_PEERAPP, `sluice-peerapp` beside the
// sluice binary or on PATH, else it builds bench/peers/peerapp from the source
// tree around the working directory into dir (it needs cgo for go-sqlite3).
func PeerBinary(ctx context.Context, sluiceBin, dir string) (string, error) {
	if p := os.Getenv("SLUICE_PEERAPP"); p != "" {
		return p, nil
	}
	if p := filepath.Join(filepath.Dir(sluiceBin), "sluice-peerapp"); fileExists(p) {
		return p, nil
	}
	if p, err := exec.LookPath("sluice-peerapp"); err == nil {
		return p, nil
	}
	root, ok := moduleRoot()
	if !ok {
		return "", fmt.Errorf("the peer app is not built: run `go build -o bin/sluice-peerapp ./bench/peers/peerapp` in sluice's source tree (or set SLUICE_PEERAPP)")
	}
	out := filepath.Join(dir, "sluice-peerapp")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./bench/peers/peerapp")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the peer app in %s: %v\n%s", root, err, b)
	}
	return out, nil
}

// moduleRoot walks up from the working directory to sluice's go.mod.
func moduleRoot() (string, bool) {
	d, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/sluicedb/sluice\n") {
			return d, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
