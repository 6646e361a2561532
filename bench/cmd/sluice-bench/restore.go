package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/sluicedb/sluice/bench/restorebench"
	"github.com/sluicedb/sluice/bench/storelatency"
)

func init() { benchCommands["restore"] = runBenchRestore }

func runBenchRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var o restorebench.Options
	fs.IntVar(&o.Rows, "rows", 468703, "rows of the single-row JSON insert workload")
	fs.IntVar(&o.PerTx, "per-tx", 1, "rows per transaction (one per request, as a web service writes)")
	fs.IntVar(&o.Runs, "runs", 5, "restores per tool (the median is reported)")
	sizes := fs.String("sizes", restorebench.RowByRowSize.Label, "database sizes, comma-separated (e.g. 25MB,250MB,1GB); 25MB is the single-row-insert database written row by row, the others are built in bulk")
	fs.BoolVar(&o.Keep, "keep", false, "keep MinIO and the work directory afterwards, for profiling (blocks until interrupted)")
	latency := storeLatencyFlag(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.StoreLatency, err = storelatency.Parse(*latency); err != nil {
		return fmt.Errorf("-store-latency: %w", err)
	}
	if o.Sizes, err = restorebench.ParseSizes(*sizes); err != nil {
		return err
	}
	if o.Sluice, err = sluiceBinary(); err != nil {
		return err
	}
	o.Out = os.Stdout
	return restorebench.Run(ctx, o)
}
