package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/embedded"
)

// sluice-bench embedded: libSQL embedded replicas (real @libsql/client,
// PyPI libsql or libsql crate processes) reading locally while a writer inserts through sluice serve
// on MinIO; local reads beside Hrana reads from the same clients, the lag
// to visibility after sync(), what a sync moves and costs the server.

func init() { benchCommands["embedded"] = runBenchEmbedded }

func runBenchEmbedded(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("embedded", flag.ContinueOnError)
	o := embedded.Options{}
	fs.IntVar(&o.Replicas, "replicas", 4, "embedded replicas, one @libsql/client process each")
	fs.IntVar(&o.Rows, "rows", 20000, "rows in the database before the run")
	fs.IntVar(&o.Reads, "reads", 20000, "local point reads per replica")
	fs.IntVar(&o.HranaReads, "hrana-reads", 1000, "the same reads over Hrana per replica (the reference)")
	fs.DurationVar(&o.Follow, "follow", 10*time.Second, "how long the replicas sync() in a loop while the writer inserts (the lag)")
	fs.DurationVar(&o.SyncWait, "sync-wait", 5*time.Second, "then measure the lag again with replicas whose sync URL asks to wait this long for the next transaction (.../db/NAME/wait/5s/); 0: skip")
	fs.DurationVar(&o.WriteEvery, "write-every", 20*time.Millisecond, "the writer's pace: one single-row insert this often")
	fs.IntVar(&o.EmptySyncs, "empty-syncs", 200, "syncs with nothing new, per replica")
	fs.IntVar(&o.Commits, "commits", 100, "single-row commits before the one measured sync")
	fs.StringVar(&o.Client, "client", "node", "the embedded replicas' client: node (@libsql/client), python (PyPI libsql) or rust (the libsql crate, built with cargo)")
	fs.StringVar(&o.Python, "python", "python3", "with -client python: the python3 that has libsql installed")
	fs.StringVar(&o.Tools, "tools", embedded.DefaultTools(), "with -client rust: the directory the libsql crate's application is built in (its cargo-target/ is shared with make deps)")
	fs.DurationVar(&o.ClientRTT, "client-rtt", time.Millisecond, "also read over Hrana across this added round trip (a TCP proxy delaying each direction by half of it), as from another host; the read target is judged there, loopback beside it; 0: loopback only")
	nodeModules := fs.String("node-modules", embedded.DefaultNodeModules(), "the node_modules directory holding @libsql/client")
	jsonOut := fs.String("json", "", "also write the figures to this file as JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.Replicas < 1 || o.Rows < 1 || o.Reads < 1 || o.HranaReads < 1 || o.EmptySyncs < 1 || o.Commits < 1 {
		return usagef("embedded", "-replicas, -rows, -reads, -hrana-reads, -empty-syncs and -commits must be at least 1")
	}
	if !slices.Contains(embedded.Clients, o.Client) {
		return usagef("embedded", "-client is one of %s, not %q", strings.Join(embedded.Clients, ", "), o.Client)
	}
	if o.ClientRTT < 0 {
		return usagef("embedded", "-client-rtt is a duration of 0 or more, not %s", o.ClientRTT)
	}
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-bench-embedded-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o.Sluice, o.WorkDir, o.NodeModules = sluice, work, *nodeModules
	rep, err := embedded.Run(ctx, o, os.Stdout)
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if rep.Missed > 0 {
		return fmt.Errorf("%d of %d targets missed", rep.Missed, len(rep.Verdicts))
	}
	return nil
}
