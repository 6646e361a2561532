package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/sluicedb/sluice/bench/coldstartbench"
	"github.com/sluicedb/sluice/bench/restorebench"
	"github.com/sluicedb/sluice/bench/storelatency"
)

func init() { benchCommands["coldstart"] = runBenchColdstart }

func runBenchColdstart(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coldstart", flag.ContinueOnError)
	var o coldstartbench.Options
	sizes := fs.String("sizes", "25MB,250MB,1GB", "database sizes in the bucket only, comma-separated (decimal units)")
	fs.IntVar(&o.Runs, "runs", 3, "cold opens per size, each a fresh server and data directory (the median is reported)")
	latency := storeLatencyFlag(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.StoreLatency, err = storelatency.Parse(*latency); err != nil {
		return fmt.Errorf("-store-latency: %w", err)
	}
	parsed, err := restorebench.ParseSizes(*sizes)
	if err != nil {
		return err
	}
	for _, s := range parsed {
		o.Sizes, o.Labels = append(o.Sizes, s.Bytes), append(o.Labels, s.Label)
	}
	if o.Sluice, err = sluiceBinary(); err != nil {
		return err
	}
	o.Out = os.Stdout
	return coldstartbench.Run(ctx, o)
}
