package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/sluicedb/sluice/internal/suggest"

	"github.com/sluicedb/sluice/bench/restorebench"
)

func init() {
	register(command{
		name:    "bench",
		summary: "load tests and benchmarks (scenarios, compare, serve, restore, handoff, soak, manydbs, list)",
		usage: `sluice bench SCENARIO|SUBCOMMAND [flags]

` + benchHelp,
		setup:        func(fs *flag.FlagSet) runFunc { return runBench },
		argsEndFlags: true,
	})
}

const benchHelp = `Scenarios (closed-loop virtual users against -url; -verify checks nothing acknowledged was lost):
  counter, put-object, bbs-write, bbs-read-all, bbs-read-100, bbs-mixed, d1-read, d1-write

Subcommands:
  compare SCENARIO   one scenario against sluice sync/async/local, go-sqlite3 + Litestream, MariaDB and a file
  serve              single-row inserts against sluice serve, a trivial handler and go-sqlite3 + Litestream
  restore            restore time and peak RSS, sluice and Litestream, beside one plain download (-sizes)
  capture            a writer flat out: sluice replicate beside Litestream (RSS, CPU per GB of WAL, lag, SIGTERM)
  handoff            the writer handoff gap (SIGTERM, kill -9) and follower lag with two serve -lease instances
  soak               minutes of sustained inserts against serve + MinIO: resources bounded, nothing acknowledged lost
  manydbs            N databases created, written once and idle in one serve: RSS and descriptors
  list REPLICA_URL   LIST latency against object count

Run 'sluice help bench NAME' for a benchmark's flags.`

// benchCommands are bench's subcommands, each a benchmark that prints its
// figures beside a reference measured in the same run.
var benchCommands = map[string]func(ctx context.Context, args []string) error{
	"restore": runBenchRestore,
}

func runBench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("bench", "which benchmark? one of: %s", strings.Join(benchNames(), ", "))
	}
	run, ok := benchCommands[args[0]]
	if !ok {
		msg := fmt.Sprintf("unknown benchmark %q", args[0])
		if s := suggest.Closest(args[0], benchNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		return usagef("bench", "%s", msg)
	}
	return run(ctx, args[1:])
}

func benchNames() []string {
	names := make([]string, 0, len(benchCommands))
	for n := range benchCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runBenchRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench restore", flag.ContinueOnError)
	var o restorebench.Options
	fs.IntVar(&o.Rows, "rows", 468703, "rows of the single-row JSON insert workload")
	fs.IntVar(&o.PerTx, "per-tx", 1, "rows per transaction (one per request, as a web service writes)")
	fs.IntVar(&o.Runs, "runs", 5, "restores per tool (the median is reported)")
	sizes := fs.String("sizes", restorebench.RowByRowSize.Label, "database sizes, comma-separated (e.g. 25MB,250MB,1GB); 25MB is the single-row-insert database written row by row, the others are built in bulk")
	fs.BoolVar(&o.Keep, "keep", false, "keep MinIO and the work directory afterwards, for profiling (blocks until interrupted)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.Sizes, err = restorebench.ParseSizes(*sizes); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.Sluice, o.Out = self, os.Stdout
	return restorebench.Run(ctx, o)
}
