package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The benchmarks are a separate binary, sluice-bench (its own Go module under
// bench/), so that the load generator and the peers it compares sluice with
// (go-sqlite3, MariaDB's driver, a histogram library) are never linked into
// sluice. `sluice bench ARGS` execs it rather than only pointing at it, so
// that `make build && bin/sluice bench serve` keeps working; exec hands over
// the terminal, the signals and the exit code with nothing in between.

func init() {
	register(command{
		name:    "bench",
		summary: "load tests and benchmarks: runs sluice-bench, a separate binary (make build)",
		usage: `sluice bench SCENARIO|SUBCOMMAND [flags]

The benchmarks are a separate binary, sluice-bench, so that the load generator and the peers
it compares sluice with are not part of sluice (make build writes bin/sluice-bench beside
bin/sluice). 'sluice bench ARGS' runs 'sluice-bench ARGS' from beside this binary or from PATH,
measuring this sluice; 'sluice help bench NAME' is 'sluice-bench help NAME'.`,
		setup:        func(*flag.FlagSet) runFunc { return runBench },
		argsEndFlags: true,
	})
}

// errNoBenchBinary is the answer of `sluice bench` where sluice-bench is not installed.
var errNoBenchBinary = errors.New("the benchmarks are a separate binary, sluice-bench, found neither beside this sluice nor on PATH: " +
	"build it with `make build` (bin/sluice-bench) and run `bin/sluice-bench SCENARIO`")

func runBench(ctx context.Context, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin, err := benchBinary(self)
	if err != nil && wantsHelp(args) {
		// Help is help even without the benchmarks built: what bench is, how to get it, exit 0.
		if c, ok := findCommand("bench"); ok {
			fmt.Fprintf(os.Stdout, "Usage: %s\n", strings.TrimSpace(c.usage))
		}
		fmt.Fprintf(os.Stdout, "\nA scenario's own flags are listed by sluice-bench, which is not built here: %s.\n", "run `make build`, then `sluice help bench SCENARIO`")
		return flag.ErrHelp
	}
	if err != nil {
		return err
	}
	env := os.Environ()
	if os.Getenv("SLUICE_BIN") == "" {
		env = append(env, "SLUICE_BIN="+self) // measure this sluice, not another one on PATH
	}
	return syscall.Exec(bin, append([]string{bin}, args...), env)
}

// wantsHelp tells whether bench's arguments ask for help (sluice help bench
// [SCENARIO] arrives as [SCENARIO] -h).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help", "help":
			return true
		}
	}
	return false
}

// benchBinary finds sluice-bench beside the running sluice, else on PATH.
func benchBinary(self string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), "sluice-bench")
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return beside, nil
	}
	if p, err := exec.LookPath("sluice-bench"); err == nil {
		return filepath.Abs(p)
	}
	return "", errNoBenchBinary
}
