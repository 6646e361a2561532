package main

import (
	"github.com/sluicedb/sluice/bench/storelatency"

	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/suite"
)

func init() {
	benchCommands["compare"] = runBenchCompare
	benchCommands["serve"] = runBenchServe
}

func runBenchCompare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	o := suite.CompareOptions{Out: os.Stdout}
	fs.IntVar(&o.VUs, "vus", 50, "virtual users")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured duration per target")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "warm-up per target")
	only := fs.String("targets", strings.Join(suite.AllTargets, ","), "targets, comma-separated")
	fs.StringVar(&o.JSON, "json", "", "write every target's results as a JSON array to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice-bench compare SCENARIO [flags]\n\nRuns SCENARIO against sluice sync, async and without a replica, go-sqlite3 +\nLitestream (peer app), the peer app on MariaDB and on a file; kills each with SIGKILL\nright after its run and restores its replica. Needs MinIO, litestream, mariadb-server.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		for _, a := range args {
			if a == "-h" || a == "-help" || a == "--help" {
				fs.SetOutput(os.Stdout)
				fs.Usage()
				return flag.ErrHelp
			}
		}
		return usagef("compare", "want SCENARIO first: sluice-bench compare SCENARIO [flags]")
	}
	o.Scenario = args[0]
	if _, err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	o.Targets = strings.Split(*only, ",")
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	o.Sluice = sluice
	if o.Bench, err = benchBinary(); err != nil {
		return err
	}
	_, err = suite.Compare(ctx, o)
	return err
}

// runBenchServe is `make bench-serve`: sluice serve where users feel it,
// each row beside a reference measured in the same run.
func runBenchServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o := suite.ServeOptions{Out: os.Stdout}
	rows := fs.String("rows", strings.Join(suite.DefaultServeRows, ","), "row groups, comma-separated: "+strings.Join(suite.ServeRowGroups, ", ")+
		" (read: read-100 on the JSON API and Hrana beside a handler returning the same bytes; writes: inserts at each -conns on each -dbs;"+
		" latency: sync p50/p99 at 1 connection beside one bare conditional PUT; window: PUTs per 1,000 writes with -window; insert: 500 connections beside the ceiling and go-sqlite3 + Litestream)")
	fs.DurationVar(&o.Duration, "duration", 8*time.Second, "measured duration per write run")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "warm-up per write run")
	fs.DurationVar(&o.ReadDuration, "read-duration", 5*time.Second, "measured duration per read run")
	fs.IntVar(&o.ReadRounds, "read-rounds", 3, "interleaved rounds of the read rows (medians are reported)")
	fs.IntVar(&o.ReadVUs, "read-conns", 100, "connections of the read rows")
	conns := fs.String("conns", "1,10,50,500", "connection counts of the write rows")
	dbs := fs.String("dbs", "1,100", "database counts the write rows spread over")
	fs.DurationVar(&o.Window, "window", 5*time.Millisecond, "the window row's -commit-window")
	fs.IntVar(&o.WindowConns, "window-conns", 50, "connections of the window row (and of the run without the window it is compared with)")
	fs.IntVar(&o.InsertVUs, "vus", 500, "connections of the insert comparison")
	fs.StringVar(&o.JSON, "json", "", "write every row as JSON to this file")
	fs.StringVar(&o.ProfileDir, "profile", "", "write CPU profiles of sluice serve during the first read runs into this directory")
	latency := storeLatencyFlag(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.StoreLatency, err = storelatency.Parse(*latency); err != nil {
		return fmt.Errorf("-store-latency: %w", err)
	}
	o.Rows = strings.Split(*rows, ",")
	if o.Conns, err = ints(*conns); err != nil {
		return fmt.Errorf("-conns: %w", err)
	}
	if o.Databases, err = ints(*dbs); err != nil {
		return fmt.Errorf("-dbs: %w", err)
	}
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	o.Sluice = sluice
	if o.Bench, err = benchBinary(); err != nil {
		return err
	}
	_, err = suite.Serve(ctx, o)
	return err
}

// storeLatencyFlag is -store-latency, shared by the benchmarks that talk to a bucket.
func storeLatencyFlag(fs *flag.FlagSet) *string {
	return fs.String("store-latency", "", "put a real bucket's latency in front of MinIO: median per request kind, log-normal (p99 ≈ 3× the median), "+
		"e.g. put=25ms,get=15ms (head and list default to get's, delete to put's; also sigma=0.47, bandwidth=100MiB per response)")
}

// runQuiet runs a command, returning its output in the error if it fails.
func runQuiet(ctx context.Context, bin string, args ...string) error {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return nil
}
