package main

import (
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
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	o := suite.CompareOptions{Out: os.Stdout}
	fs.IntVar(&o.VUs, "vus", 50, "virtual users")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured duration per target")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "warm-up per target")
	only := fs.String("targets", strings.Join(suite.AllTargets, ","), "targets, comma-separated")
	fs.StringVar(&o.JSON, "json", "", "write every target's results as a JSON array to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice bench compare SCENARIO [flags]\n\nRuns SCENARIO against sluice sync, async and without a replica, go-sqlite3 +\nLitestream (peer app), the peer app on MariaDB and on a file; kills each with SIGKILL\nright after its run and restores its replica. Needs MinIO, litestream, mariadb-server.\n\nFlags:\n")
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
		return usagef("bench compare", "want SCENARIO first: sluice bench compare SCENARIO [flags]")
	}
	o.Scenario = args[0]
	if _, err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	o.Targets = strings.Split(*only, ",")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.Sluice = self
	_, err = suite.Compare(ctx, o)
	return err
}

// runBenchServe is `make bench-serve`: single-row inserts against sluice serve and its references.
func runBenchServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	o := suite.ServeOptions{Out: os.Stdout}
	fs.IntVar(&o.VUs, "vus", 500, "concurrent keep-alive connections")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "measured duration per target")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "warm-up per target")
	fs.StringVar(&o.JSON, "json", "", "write the three runs as a JSON array to this file")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.Sluice = self
	_, err = suite.Serve(ctx, o)
	return err
}

// runQuiet runs a command, returning its output in the error if it fails.
func runQuiet(ctx context.Context, bin string, args ...string) error {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return nil
}
