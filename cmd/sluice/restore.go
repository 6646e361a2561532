package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

func init() {
	register(command{name: "restore", summary: "rebuild a database from a replica, to its latest state or a point in time", run: runRestore})
}

type restoreFlags struct {
	out             string
	txid            string
	timestamp       string
	ifReplicaExists bool
	ifDBNotExists   bool
	integrityCheck  integrityMode
	parallelism     int
	configPath      string
	quiet           bool
	verbose         bool
}

func runRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var f restoreFlags
	fs.StringVar(&f.out, "o", "", "output database path (required unless -config names the database)")
	fs.StringVar(&f.txid, "txid", "", "restore up to this TXID (decimal, or 16 hex digits as in file names)")
	fs.StringVar(&f.timestamp, "timestamp", "", "restore the state as of this time (RFC 3339)")
	fs.BoolVar(&f.ifReplicaExists, "if-replica-exists", false, "exit 0 without doing anything if the replica is empty")
	fs.BoolVar(&f.ifDBNotExists, "if-db-not-exists", false, "exit 0 without doing anything if the output already exists")
	fs.Var(&f.integrityCheck, "integrity-check", "`MODE`: none, quick (PRAGMA quick_check) or full (PRAGMA integrity_check), run before the database is put in place;\nif it reports anything but ok the restore fails and no file is placed. Given alone: full")
	fs.IntVar(&f.parallelism, "parallelism", 8, "downloads in flight")
	fs.StringVar(&f.configPath, "config", "", "sidecar config: restore the database at this path from its configured replica")
	fs.BoolVar(&f.quiet, "q", false, "no progress bar")
	fs.BoolVar(&f.verbose, "v", false, "log the plan and the time each phase took")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: sluice restore [flags] REPLICA_URL\n       sluice restore -config sluice.yml [-o OUT] DB_PATH\n\nChecksums are always verified; the output is written to a temp file, fsynced and renamed,\nso a failed restore leaves nothing behind. Missing folders of the output are created and\nthe file gets the mode the umask gives (0644 under umask 022). A damaged or unreadable\ncompacted file is left out (one warning line) when lower levels cover its TXIDs.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(joinIntegrityMode(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want exactly one REPLICA_URL (or DB_PATH with -config)")
	}
	url, out := fs.Arg(0), f.out
	if f.configPath != "" {
		t, err := configTarget(f.configPath, fs.Arg(0))
		if err != nil {
			return err
		}
		url = t.ReplicaURL
		if out == "" {
			out = t.Path
		}
	}
	if out == "" {
		return fmt.Errorf("-o OUT is required")
	}

	opts := restore.Options{Parallelism: f.parallelism, IntegrityCheck: f.integrityCheck == "full", QuickCheck: f.integrityCheck == "quick"}
	if f.verbose {
		opts.Logger = newLogger(true)
	} else {
		// Warnings only: a damaged file left out is said in one line; the summary below says the rest.
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if f.txid != "" && f.timestamp != "" {
		return fmt.Errorf("-txid and -timestamp are exclusive")
	}
	if f.txid != "" {
		id, err := parseTXID(f.txid)
		if err != nil {
			return err
		}
		opts.TXID = id
	}
	if f.timestamp != "" {
		ts, err := time.Parse(time.RFC3339Nano, f.timestamp)
		if err != nil {
			return fmt.Errorf("-timestamp %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", f.timestamp)
		}
		opts.Timestamp = ts
	}

	if _, err := os.Stat(out); err == nil {
		if f.ifDBNotExists {
			fmt.Fprintf(os.Stderr, "%s exists; nothing to restore (-if-db-not-exists)\n", out)
			return nil
		}
		return fmt.Errorf("%s already exists: restore never overwrites; remove it or choose another -o", out)
	}

	store, err := replicaurl.Open(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()

	bar := newProgressBar(os.Stderr, f.quiet)
	opts.Progress = bar.update
	start := time.Now()
	res, err := restore.Restore(ctx, store, out, opts)
	bar.finish(err == nil)
	if errors.Is(err, restore.ErrNoReplica) && f.ifReplicaExists {
		fmt.Fprintf(os.Stderr, "%s holds no database; nothing to restore (-if-replica-exists)\n", store)
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore from %s: %w", store, err)
	}
	if opts.TXID == 0 && opts.Timestamp.IsZero() {
		// Lets `sluice replicate` continue from here without re-uploading.
		_ = engine.RecordPosition(out, store.String(), res.Pos)
	}
	fmt.Fprintf(os.Stderr, "restored %s to TXID %s (%d pages of %d bytes) from %d files, %s downloaded in %s\n",
		out, res.Pos.TXID, res.Pages, res.PageSize, len(res.Files), formatBytes(res.Bytes), time.Since(start).Round(time.Millisecond))
	return nil
}

// integrityMode is -integrity-check's value. It is a boolean flag so that a
// bare -integrity-check (a full check) is accepted; joinIntegrityMode makes
// Litestream's spaced form "-integrity-check quick" parse too.
type integrityMode string

func (m *integrityMode) String() string   { return string(*m) }
func (m *integrityMode) IsBoolFlag() bool { return true }
func (m *integrityMode) Set(s string) error {
	switch s {
	case "none", "false":
		*m = ""
	case "quick":
		*m = "quick"
	case "full", "true":
		*m = "full"
	default:
		return fmt.Errorf("want none, quick or full")
	}
	return nil
}

// joinIntegrityMode rewrites "-integrity-check MODE" as
// "-integrity-check=MODE" when MODE is one of the modes.
func joinIntegrityMode(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "-integrity-check" || a == "--integrity-check") && i+1 < len(args) {
			switch args[i+1] {
			case "none", "quick", "full":
				out = append(out, a+"="+args[i+1])
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// parseTXID accepts decimal ("42") or the 16-hex-digit form used in file names.
func parseTXID(s string) (ltx.TXID, error) {
	if len(s) == 16 {
		return ltx.ParseTXID(s)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("-txid %q: want a positive decimal TXID or 16 hex digits", s)
	}
	return ltx.TXID(n), nil
}

// configTarget finds dbPath among the config's databases.
func configTarget(configPath, dbPath string) (dbTarget, error) {
	cfg, err := loadSidecarConfig(configPath)
	if err != nil {
		return dbTarget{}, err
	}
	targets, err := cfg.targets()
	if err != nil {
		return dbTarget{}, err
	}
	want, err := absPath(dbPath)
	if err != nil {
		return dbTarget{}, err
	}
	for _, t := range targets {
		if t.Path == want {
			return t, nil
		}
	}
	return dbTarget{}, fmt.Errorf("%s is not listed in %s", dbPath, configPath)
}
