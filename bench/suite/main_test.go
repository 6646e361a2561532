package suite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// sluiceBin, benchBin and peerBin are the binaries under test, built once per
// test process into one directory, as `make build` puts them.
var sluiceBin, benchBin, peerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bench-test-")
	if err != nil {
		panic(err)
	}
	sluiceBin, benchBin, peerBin = filepath.Join(dir, "sluice"), filepath.Join(dir, "sluice-bench"), filepath.Join(dir, "sluice-peerapp")
	// sluice is built in its own module (the source tree above), with the
	// dependency versions its go.mod ships, not this module's.
	for _, b := range [][3]string{{sluiceBin, "../..", "./cmd/sluice"}, {benchBin, ".", "../cmd/sluice-bench"}, {peerBin, ".", "../peers/peerapp"}} {
		cmd := exec.Command("go", "build", "-o", b[0], b[2])
		cmd.Dir, cmd.Stdout, cmd.Stderr = b[1], os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", b[2], "in", b[1], err)
			os.Exit(1)
		}
	}
	os.Setenv("SLUICE_PEERAPP", peerBin)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// bench runs sluice-bench (which measures the sluice beside it) and returns
// its combined output.
func bench(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*60e9)
	defer cancel()
	cmd := exec.CommandContext(ctx, benchBin, args...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func targetsRun(ctx context.Context, bin string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %v: %w\n%s", bin, args, err, out)
	}
	return string(out), nil
}
