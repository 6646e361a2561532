package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

func init() {
	register(command{
		name:    "restore",
		summary: "rebuild a database from a replica, to its latest state or a point in time",
		usage: `sluice restore [flags] REPLICA_URL -o OUT
       sluice restore [flags] DB_PATH          (finds DB_PATH's replica in -config, $LITESTREAM_CONFIG or /etc/litestream.yml)

Checksums are always verified; the output is written to a temp file, fsynced and renamed,
so a failed restore leaves nothing behind. -txid and -timestamp pick a point in time.
Missing folders of the output are created and the file gets the mode the umask gives
(0644 under umask 022). A damaged or unreadable compacted file is left out (one warning
line) when lower levels cover its TXIDs.`,
		setup: setupRestore,
	})
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
	noExpandEnv     bool
	quiet           bool
	verbose         bool
}

// integrityMode is -integrity-check: none, quick or full; the bare flag is full.
type integrityMode string

func (m *integrityMode) String() string   { return string(*m) }
func (m *integrityMode) IsBoolFlag() bool { return true }
func (m *integrityMode) Set(v string) error {
	switch v {
	case "true", "full":
		*m = "full"
	case "quick":
		*m = "quick"
	case "false", "none":
		*m = ""
	default:
		return fmt.Errorf("want none, quick or full, not %q", v)
	}
	return nil
}

func setupRestore(fs *flag.FlagSet) runFunc {
	var f restoreFlags
	fs.StringVar(&f.out, "o", "", "output database path (default with a config: the database's own path)")
	fs.StringVar(&f.txid, "txid", "", "restore up to this TXID (decimal, or 16 hex digits as in file names)")
	fs.StringVar(&f.timestamp, "timestamp", "", "restore the state as of this time (RFC 3339, e.g. 2026-01-02T15:04:05Z)")
	fs.BoolVar(&f.ifReplicaExists, "if-replica-exists", false, "exit 0 without doing anything if the replica is empty")
	fs.BoolVar(&f.ifDBNotExists, "if-db-not-exists", false, "exit 0 without doing anything if the output already exists")
	fs.Var(&f.integrityCheck, "integrity-check", "`MODE`: none, quick (PRAGMA quick_check) or full (PRAGMA integrity_check), run before the database is put in place;\nif it reports anything but ok the restore fails and no file is placed. Given alone: full")
	fs.IntVar(&f.parallelism, "parallelism", 8, "downloads in flight")
	fs.StringVar(&f.configPath, "config", "", "config file: restore DB_PATH from its configured replica")
	fs.BoolVar(&f.noExpandEnv, "no-expand-env", false, "do not expand $VAR and ${VAR} in the config")
	fs.BoolVar(&f.quiet, "q", false, "no progress bar")
	fs.BoolVar(&f.verbose, "v", false, "log the plan and the time each phase took")
	return func(ctx context.Context, args []string) error {
		// Litestream writes `-integrity-check full`: the bool-style flag left
		// the mode among the arguments.
		if len(args) == 2 && flagSet(fs, "integrity-check") {
			for i, a := range args {
				if a == "quick" || a == "full" || a == "none" {
					_ = f.integrityCheck.Set(a)
					args = append(args[:i:i], args[i+1:]...)
					break
				}
			}
		}
		return runRestore(ctx, f, args)
	}
}

// restoreHeapLimit: a restore's working set is a few bounded buffers per
// file in flight, so collecting garbage before the heap reaches this only
// costs time (a 25 MB restore collected several times, ~8 % of its run);
// past it the collector runs as usual, and memory stays bounded.
const restoreHeapLimit = 64 << 20

// collectRestoreGarbageLate lets the heap reach restoreHeapLimit before the
// first collection, unless the operator set GOGC or GOMEMLIMIT.
func collectRestoreGarbageLate() {
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(restoreHeapLimit)
	}
}

func runRestore(ctx context.Context, f restoreFlags, args []string) error {
	applyLitestreamEnv()
	collectRestoreGarbageLate()
	if len(args) != 1 {
		return usagef("restore", "want exactly one REPLICA_URL or DB_PATH, got %d arguments", len(args))
	}
	url, out := args[0], f.out
	configPath := f.configPath
	if configPath == "" && !strings.Contains(url, "://") {
		// Litestream's `restore DB_PATH`: a path listed in the default config.
		if p := defaultConfigPath(); p != "" {
			if _, err := configTarget(p, url, f.noExpandEnv); err == nil {
				configPath = p
			}
		}
	}
	if configPath != "" {
		t, err := configTarget(configPath, url, f.noExpandEnv)
		if err != nil {
			return err
		}
		url = t.ReplicaURL
		if out == "" {
			out = t.Path
		}
	} else if st, err := os.Stat(url); err == nil && !st.IsDir() {
		// Litestream's form without a config that lists the path: a database
		// file read as a replica directory would only fail obscurely.
		return fmt.Errorf("%s is a file, not a replica: give its replica URL, or -config listing it (neither $LITESTREAM_CONFIG nor /etc/litestream.yml lists it)", url)
	}
	if out == "" {
		return usagef("restore", "-o OUT is required")
	}
	if err := replicaurl.Check(url); err != nil {
		return err
	}

	opts := restore.Options{Parallelism: f.parallelism, IntegrityCheck: f.integrityCheck == "full", QuickCheck: f.integrityCheck == "quick"}
	if f.verbose {
		opts.Logger = newLogger(true)
	} else {
		// Warnings only: a damaged file left out is said in one line; the summary below says the rest.
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if f.txid != "" && f.timestamp != "" {
		return usagef("restore", "-txid and -timestamp are exclusive")
	}
	if f.parallelism < 0 {
		return usagef("restore", "-parallelism %d: give a positive number, or 0 for the default (%d)", f.parallelism, restore.DefaultParallelism)
	}
	if f.txid != "" {
		id, err := parseTXID(f.txid)
		if err != nil {
			return usagef("restore", "%v", err)
		}
		opts.TXID = id
	}
	if f.timestamp != "" {
		ts, err := time.Parse(time.RFC3339Nano, f.timestamp)
		if err != nil {
			return usagef("restore", "-timestamp %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", f.timestamp)
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
func configTarget(configPath, dbPath string, noExpandEnv bool) (dbTarget, error) {
	cfg, err := loadSidecarConfig(configPath, noExpandEnv)
	if err != nil {
		return dbTarget{}, err
	}
	targets, err := cfg.targets(func(string) {})
	if err != nil {
		return dbTarget{}, err
	}
	p, err := expandHome(dbPath)
	if err != nil {
		return dbTarget{}, err
	}
	want, err := absPath(p)
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
