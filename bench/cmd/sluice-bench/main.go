// Command sluice-bench runs sluice's load tests and benchmarks: scenarios,
// comparisons with Litestream and MariaDB, restore, capture, handoff, soak,
// many databases and LIST latency, each printing its figures beside a
// reference measured in the same run.
//
// It is its own binary, in its own module, so that the load generator and the
// peers it measures sluice against never enter the sluice binary. It measures
// the sluice of $SLUICE_BIN, else the one beside it, else the one on PATH
// (`sluice bench ARGS` execs it with SLUICE_BIN set to itself).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/internal/cliflag"
	"github.com/sluicedb/sluice/internal/suggest"
)

const benchHelp = `Scenarios (closed-loop virtual users against -url; -verify checks nothing acknowledged was lost):
  counter, put-object, bbs-write, bbs-read-all, bbs-read-100, bbs-mixed, d1-read, d1-write

Subcommands:
  compare SCENARIO   one scenario against sluice sync/async/local, go-sqlite3 + Litestream, MariaDB and a file
  serve              single-row inserts against sluice serve, a trivial handler and go-sqlite3 + Litestream
  restore            restore time and peak RSS, sluice and Litestream, beside one plain download (-sizes)
  coldstart          first query on a database only in the bucket (cold open), beside a full restore and one GET (-sizes)
  capture            a writer flat out: sluice replicate beside Litestream (RSS, CPU per GB of WAL, lag, SIGTERM)
  handoff            the writer handoff gap (SIGTERM, kill -9) and follower lag with two serve -lease instances
  soak               minutes of sustained inserts against serve + MinIO: resources bounded, nothing acknowledged lost
  manydbs            N databases created, written once and idle in one serve: RSS and descriptors
  hostile            hostile neighbours: attacks beside a canary client; its p50/p99 and the server's peak RSS
  embedded           libSQL embedded replicas reading locally while a writer inserts: beside Hrana reads, sync lag and cost
  list REPLICA_URL   LIST latency against object count

The sluice measured is $SLUICE_BIN, else the sluice beside sluice-bench, else the one on PATH.
Run 'sluice-bench help NAME' for a benchmark's flags.`

func usage(w io.Writer) {
	fmt.Fprintf(w, "sluice-bench: sluice's load tests and benchmarks\n\nUsage: sluice-bench SCENARIO|SUBCOMMAND [flags]\n\n%s\n", benchHelp)
}

// benchCommands are the subcommands, each a benchmark that prints its
// figures beside a reference measured in the same run.
var benchCommands = map[string]func(ctx context.Context, args []string) error{}

func main() { os.Exit(dispatch(os.Args[1:])) }

// dispatch runs the command line args and returns the exit code.
func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	name, args := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		usage(os.Stdout)
		return 0
	case "help":
		if len(args) == 0 {
			usage(os.Stdout)
			return 0
		}
		// `sluice-bench help restore` is `sluice-bench restore -h`.
		name, args = args[0], append(args[1:], "-h")
	}
	run, ok := benchCommands[name]
	if !ok {
		msg := fmt.Sprintf("unknown benchmark %q", name)
		if s := suggest.Closest(name, benchNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		fmt.Fprintf(os.Stderr, "sluice-bench: %s\nRun 'sluice-bench help' for the list of benchmarks.\n", msg)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, args)
	stop()
	var ee exitError
	var ue cliflag.UsageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // help was printed on stdout
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "sluice-bench %s: %s\nRun 'sluice-bench help %s' for usage.\n", name, ue.Msg, name)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "sluice-bench %s: %v\n", name, err)
		return 1
	}
}

func benchNames() []string {
	names := make([]string, 0, len(benchCommands))
	for n := range benchCommands {
		if n != "ceiling-server" { // a reference the benchmarks start, not a benchmark
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// exitError carries a specific exit code out of a benchmark.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

var usagef = cliflag.Usagef

// parseFlags parses a benchmark's flags, before or after its arguments; -h
// prints the flag set's own Usage, or a generated one.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	cliflag.Humanize(fs)
	return cliflag.Parse(fs, args, false, func(w io.Writer) {
		// A flag set without its own Usage prints the flag package's "Usage of".
		var b strings.Builder
		fs.SetOutput(&b)
		fs.Usage()
		if !strings.HasPrefix(b.String(), "Usage of ") {
			io.WriteString(w, b.String())
			return
		}
		fmt.Fprintf(w, "Usage: sluice-bench %s [flags]\n\nFlags:\n", fs.Name())
		cliflag.PrintDefaults(w, fs)
	})
}

// sluiceBinary is the sluice under measurement (see targets.SluiceBinary).
func sluiceBinary() (string, error) { return targets.SluiceBinary() }

// benchBinary is this binary, whose ceiling-server subcommand is the
// benchmarks' ceiling.
func benchBinary() (string, error) { return os.Executable() }

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
