package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/sluicedb/sluice/replica/inspect"
)

func init() {
	register(command{
		name:    "info",
		summary: "summarize a replica: levels, size, footprint, restore points",
		usage: `sluice info [flags] REPLICA_URL
       sluice info [flags] DB_PATH         (finds DB_PATH's replica in -config, $LITESTREAM_CONFIG or /etc/litestream.yml)

Shows each level's files, TXID range and bytes, the database size the replica
rebuilds, the replica's footprint beside it, and its restore points: the TXIDs
'sluice restore -txid' accepts and the times 'sluice restore -timestamp' resolves
(the newest point at or before the time given). Reads listings and one LTX header
per run of restore points, never whole files.`,
		setup: setupInfo,
	})
}

func setupInfo(fs *flag.FlagSet) runFunc {
	var src replicaSource
	src.flags(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	parallelism := fs.Int("parallelism", 8, "header reads in flight")
	return func(ctx context.Context, args []string) error {
		store, err := src.open(ctx, "info", args)
		if err != nil {
			return err
		}
		defer store.Close()
		sum, err := inspect.Summarize(ctx, store, *parallelism)
		if errors.Is(err, inspect.ErrEmpty) {
			return emptyReplicaError(store)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSONOut(os.Stdout, sum)
		}
		return printSummary(os.Stdout, sum)
	}
}

func printSummary(out io.Writer, s inspect.Summary) error {
	ts := func(t time.Time) string { return t.Format(time.RFC3339) }
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintf(w, "replica:\t%s\n", s.Replica)
	if s.RestorePoints > 0 {
		fmt.Fprintf(w, "database:\t%s at TXID %d (%s), committed %s: %d pages of %d bytes\n",
			formatBytes(s.DatabaseBytes), s.Latest, s.Latest, ts(s.LatestTime), s.Pages, s.PageSize)
	}
	fmt.Fprintf(w, "files:\t%d, %s in all", s.Files, formatBytes(s.Bytes))
	if s.Footprint > 0 {
		fmt.Fprintf(w, " (%.2f× the database)", s.Footprint)
	}
	fmt.Fprintf(w, "\nuploaded:\t%s .. %s (%s)\n\n", ts(s.Oldest), ts(s.Newest), s.Newest.Sub(s.Oldest).Round(time.Second))
	fmt.Fprintln(w, "level\tfiles\tmin_txid\tmax_txid\tbytes\toldest\tnewest")
	for _, l := range s.Levels {
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d\t%s\t%s\n", l.Level, l.Files, l.MinTXID, l.MaxTXID, l.Bytes, ts(l.Oldest), ts(l.Newest))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if s.RestorePoints == 0 {
		fmt.Fprintf(out, "\nno restore point: no file starts at TXID 1 (no snapshot), so nothing can be restored from this replica\n")
		return nil
	}
	fmt.Fprintf(out, "\nrestore points: %d (restore -txid N; -timestamp T restores the newest point at or before T)\n", s.RestorePoints)
	w = tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "  from_txid\tto_txid\tpoints\tfrom_time\tto_time")
	for _, r := range s.RestoreRanges {
		fmt.Fprintf(w, "  %d\t%d\t%d\t%s\t%s\n", r.First, r.Last, r.Points, ts(r.FirstTime), ts(r.LastTime))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !s.MaxTXIDRestorable {
		fmt.Fprintf(out, "\nwarning: files reach TXID %d but no chain of files rebuilds it (a gap): the newest restorable TXID is %d\n", s.MaxTXID, s.Latest)
	}
	return nil
}

// emptyReplicaError is what info and ltx say of a replica without any LTX
// file: most often a mistyped URL, so it fails rather than printing nothing.
func emptyReplicaError(store fmt.Stringer) error {
	return fmt.Errorf("%s holds no LTX file: nothing replicated there yet (check the URL; a serve replica keeps each database under <replica>/<name>)", store)
}
