package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicedb/sluice/bench/soak"
)

func init() { benchCommands["soak"] = runBenchSoak }

func runBenchSoak(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: sluice-bench soak [flags]

Sustained single-row inserts against sluice serve (-durability sync, or async) replicating to a local MinIO.
Every window prints acknowledged writes/s, errors, p99, and the server's RSS (with the MiB the Go
runtime and SQLite hold of it), open descriptors, connections to the store, objects, level-0 files and level-0 backlog in the bucket. Fails (exit 1)
if a window acknowledges nothing or a resource keeps growing (the rules are printed), then
SIGTERMs the server, restores every database with sluice restore and checks every acknowledged
write is present.

Flags:`)
		fs.PrintDefaults()
	}
	var o soak.Options
	fs.DurationVar(&o.Duration, "duration", 10*time.Minute, "how long the load runs")
	fs.IntVar(&o.Connections, "connections", 50, "concurrent connections, each inserting one row per request")
	fs.IntVar(&o.Databases, "databases", 1, "databases the inserts are spread over")
	fs.DurationVar(&o.Window, "window", 10*time.Second, "reporting window")
	fs.DurationVar(&o.Warmup, "warmup", time.Minute, "left out of the growth rules")
	fs.StringVar(&o.JSON, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&o.ServeConfig, "config", "", "sluice serve config file (YAML) to soak a tuning; the soak's own flags override its data, listen, replica and durability")
	fs.StringVar(&o.Durability, "durability", "sync", "sluice serve's durability: sync (a write answered once in the bucket) or async (once committed locally; every answered write must still be restored after SIGTERM)")
	fs.StringVar(&o.WorkDir, "dir", "", "work directory (MinIO, server data), kept afterwards (default: a temp dir, removed)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("soak", "unexpected arguments: %q", pos)
	}
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	o.Sluice, o.Out = sluice, os.Stdout
	if _, err := soak.Run(ctx, o); err != nil {
		if errors.Is(err, soak.ErrFailed) {
			return exitError{1} // the failure lines are printed
		}
		return err
	}
	return nil
}
