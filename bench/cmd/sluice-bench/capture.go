package main

import (
	"github.com/sluicedb/sluice/bench/storelatency"

	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/capturebench"
)

func init() { benchCommands["capture"] = runBenchCapture }

func runBenchCapture(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: sluice-bench capture [flags]\n\nA writer commits ~1 KB rows as fast as it can while `sluice replicate` ships them to a local\nMinIO; then the same load with `litestream replicate` (0.5.17). Prints peak RSS, CPU per GB of WAL,\nlag p50/p99 per window, WAL peak size and SIGTERM-to-exit time side by side. Needs MinIO and litestream.\n\nFlags:")
		fs.PrintDefaults()
	}
	var o capturebench.Options
	tools := fs.String("tools", "sluice,litestream", "replicators to measure, in order")
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the writer writes, per replicator")
	fs.IntVar(&o.RowBytes, "row-bytes", 1024, "bytes per inserted row (random, incompressible)")
	fs.IntVar(&o.RowsPerTx, "rows-per-tx", 1, "rows per transaction")
	fs.DurationVar(&o.Window, "window", 30*time.Second, "lag percentiles per window of this length")
	fs.DurationVar(&o.Poll, "poll", 100*time.Millisecond, "bucket poll period (the lag's resolution)")
	fs.StringVar(&o.LogDir, "logs", "", "also write each replicator's output to DIR/<tool>.log (sluice with -v)")
	latency := storeLatencyFlag(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if o.StoreLatency, err = storelatency.Parse(*latency); err != nil {
		return fmt.Errorf("-store-latency: %w", err)
	}
	o.Tools = strings.Split(*tools, ",")
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	o.Sluice, o.Out = sluice, os.Stdout
	return capturebench.Run(ctx, o)
}
