package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sluiceBin and benchBin are the binaries under test, built once per test
// process into one directory, as `make build` puts them: sluice-bench finds
// the sluice it measures beside itself.
var sluiceBin, benchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bench-cmd-")
	if err != nil {
		panic(err)
	}
	sluiceBin, benchBin = filepath.Join(dir, "sluice"), filepath.Join(dir, "sluice-bench")
	// sluice is built in its own module (the source tree above), with the
	// dependency versions its go.mod ships, not this module's.
	for _, b := range [][3]string{{sluiceBin, "../../..", "./cmd/sluice"}, {benchBin, ".", "."}} {
		build := exec.Command("go", "build", "-o", b[0], b[2])
		build.Dir, build.Stdout, build.Stderr = b[1], os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", b[2], "in", b[1], err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// mustBench runs sluice-bench to completion, failing the test on a non-zero
// exit, and returns its combined output.
func mustBench(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, benchBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice-bench %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// run3 runs bin with args and returns its stdout, stderr and exit code.
func run3(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errb.String(), code
}
