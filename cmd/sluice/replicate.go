package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/replica/watch"
	"github.com/sluicedb/sluice/replicated"
)

func init() {
	register(command{
		name:    "replicate",
		summary: "stream a database another process writes to a replica (sidecar)",
		usage: `sluice replicate [flags] DB_PATH REPLICA_URL
       sluice replicate [flags] -db DB_PATH -replica REPLICA_URL
       sluice replicate [flags] -config sluice.yml        (a Litestream config works as it is)
       sluice replicate [flags] -exec "myapp --port 8080"

Checks that the replica can be listed and written, then ships every commit of the
database to it until SIGTERM/SIGINT, ships everything left and exits 0. With -exec
(or exec: in the config) it runs the application like 'sluice run' and stops when the
application exits.

Without DB_PATH, -db or -config, the config is $LITESTREAM_CONFIG, else
/etc/litestream.yml if it exists.

` + exitCodes,
		setup:       setupReplicate,
		longRunning: true,
	})
}

// exitFenced is the exit code when another writer took over the replica.
const exitFenced = 3

type sidecarFlags struct {
	configPath       string
	noExpandEnv      bool
	dbPath           string
	replicaURL       string
	exec             string
	syncInterval     time.Duration
	snapshotInterval time.Duration
	retention        time.Duration
	l0Retention      time.Duration
	verbose          bool
	syncIntervalSet  bool
	lease            leaseFlags
	fail             failFlags
}

func (f *sidecarFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.configPath, "config", "", "YAML config listing databases and replicas (a Litestream config works as it is)")
	fs.BoolVar(&f.noExpandEnv, "no-expand-env", false, "do not expand $VAR and ${VAR} in the config (a password containing $)")
	fs.StringVar(&f.dbPath, "db", "", "database path, with -replica (instead of -config)")
	fs.StringVar(&f.replicaURL, "replica", "", "replica URL: s3://BUCKET/PATH, gs://, abs://, file:///DIR (with -db)")
	fs.DurationVar(&f.syncInterval, "sync-interval", time.Second, "ship committed changes at least this often")
	fs.DurationVar(&f.syncInterval, "interval", time.Second, "same as -sync-interval")
	fs.DurationVar(&f.snapshotInterval, "snapshot-interval", 0, "write a full snapshot this often (default 1h)")
	fs.DurationVar(&f.retention, "retention", 0, "keep what restores any point in this window (default 24h)")
	fs.DurationVar(&f.l0Retention, "l0-retention", 0, "keep per-sync files this long after compaction (default 5m)")
	fs.BoolVar(&f.verbose, "v", false, "log every shipped file")
	f.lease.register(fs)
	f.fail.register(fs)
}

// check refuses flag values that would otherwise be replaced by a default
// without a word, or that contradict each other.
func (f *sidecarFlags) check(cmd string, fs *flag.FlagSet) error {
	f.syncIntervalSet = flagSet(fs, "sync-interval") || flagSet(fs, "interval")
	if f.syncIntervalSet && f.syncInterval <= 0 {
		return usagef(cmd, "-sync-interval %s: give a positive duration", f.syncInterval)
	}
	for name, d := range map[string]time.Duration{"snapshot-interval": f.snapshotInterval, "retention": f.retention, "l0-retention": f.l0Retention} {
		if flagSet(fs, name) && d <= 0 {
			return usagef(cmd, "-%s %s: give a positive duration", name, d)
		}
	}
	if flagSet(fs, "replica-error-budget") && f.fail.budget <= 0 {
		return usagef(cmd, "-replica-error-budget %s: give a positive duration (to never stop, -on-replica-error continue)", f.fail.budget)
	}
	return f.lease.check(cmd, fs)
}

// sidecarPlan is what replicate and run do, resolved from flags and config.
type sidecarPlan struct {
	targets []dbTarget
	compact compact.Config
	exec    string // the application to run (replicate -exec, exec: in the config)
	logger  *slog.Logger
}

// resolve turns flags, config and positional args into a plan. Flags win
// over the config. Without DB_PATH, -db or -config, Litestream's default
// config is used. Notices about config keys that do not apply are logged.
func (f *sidecarFlags) resolve(cmd string, args []string) (*sidecarPlan, error) {
	applyLitestreamEnv()
	plan := &sidecarPlan{exec: f.exec}
	if f.dbPath != "" || f.replicaURL != "" {
		if f.dbPath == "" || f.replicaURL == "" {
			return nil, usagef(cmd, "-db and -replica go together")
		}
		if len(args) > 0 {
			return nil, usagef(cmd, "give -db/-replica or DB_PATH REPLICA_URL, not both")
		}
		args = []string{f.dbPath, f.replicaURL}
	}
	configPath := f.configPath
	if configPath == "" && len(args) == 0 {
		configPath = defaultConfigPath()
	}
	var notices []string
	logging := loggingConfig{}
	switch {
	case configPath != "" && len(args) > 0:
		return nil, usagef(cmd, "give either -config or DB_PATH REPLICA_URL, not both")
	case configPath != "":
		cfg, err := loadSidecarConfig(configPath, f.noExpandEnv)
		if err != nil {
			return nil, err
		}
		raw, _ := os.ReadFile(configPath)
		notices = inapplicableNotices(raw)
		if plan.targets, err = cfg.targets(func(s string) { notices = append(notices, s) }); err != nil {
			return nil, fmt.Errorf("config %s: %w", configPath, err)
		}
		plan.compact.SnapshotInterval, plan.compact.Retention = cfg.compaction(func(s string) { notices = append(notices, s) })
		plan.compact.L0Retention = time.Duration(cfg.L0Retention)
		if f.exec == "" {
			plan.exec = cfg.Exec
		}
		if f.fail.addr == "" {
			f.fail.addr = cfg.Addr
		}
		logging = cfg.Logging
	case len(args) == 2:
		plan.targets = []dbTarget{{Path: args[0], ReplicaURL: args[1]}}
	case len(args) == 1:
		return nil, usagef(cmd, "missing REPLICA_URL after %s", args[0])
	case len(args) > 2:
		return nil, usagef(cmd, "want DB_PATH REPLICA_URL, got %d arguments: %q", len(args), args)
	default:
		return nil, usagef(cmd, "want DB_PATH REPLICA_URL, -db and -replica, or -config FILE (or $LITESTREAM_CONFIG, /etc/litestream.yml)")
	}
	for i := range plan.targets {
		if plan.targets[i].SyncInterval == 0 {
			plan.targets[i].SyncInterval = f.syncInterval
		}
	}
	if f.syncIntervalSet {
		for i := range plan.targets {
			plan.targets[i].SyncInterval = f.syncInterval
		}
	}
	if f.snapshotInterval > 0 {
		plan.compact.SnapshotInterval = f.snapshotInterval
	}
	if f.retention > 0 {
		plan.compact.Retention = f.retention
	}
	if f.l0Retention > 0 {
		plan.compact.L0Retention = f.l0Retention
	}
	logger, err := configLogger(logging, f.verbose)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", configPath, err)
	}
	plan.logger = logger
	if configPath != "" && f.configPath == "" {
		logger.Info("using config", "path", configPath)
	}
	for _, n := range notices {
		logger.Info("config: " + n)
	}
	for _, t := range plan.targets {
		if err := checkReplicaURL(t.ReplicaURL, filepath.Dir(t.Path), logger); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Path, err)
		}
	}
	return plan, nil
}

func setupReplicate(fs *flag.FlagSet) runFunc {
	var sf sidecarFlags
	sf.register(fs)
	fs.StringVar(&sf.exec, "exec", "", "run this application (one string, split like a shell) and stop when it exits, as 'sluice run' does")
	return func(ctx context.Context, args []string) error {
		if err := sf.check("replicate", fs); err != nil {
			return err
		}
		plan, err := sf.resolve("replicate", args)
		if err != nil {
			return err
		}
		if plan.exec != "" {
			argv, err := splitCommandLine(plan.exec)
			if err != nil {
				return fmt.Errorf("exec %q: %w", plan.exec, err)
			}
			return superviseApp(ctx, &sf, plan, argv)
		}
		logger := plan.logger
		// Stopped during the checks, it goes on all the same: the
		// replication's last try ships what the application committed.
		if err := preflight(ctx, plan.targets, sf.fail, false, logger); err != nil && ctx.Err() == nil {
			return err
		}
		status := newSidecarStatus(plan.targets, sf.fail)
		if sf.fail.addr != "" {
			if err := status.serve(ctx, sf.fail.addr, logger); err != nil {
				return err
			}
		}
		leases := newSidecarLeases(sf.lease, logger)
		defer leases.releaseAll()
		closeStores, err := restoreMissing(ctx, plan.targets, sf.lease, leases, logger, false)
		if err != nil {
			return err
		}
		defer closeStores()
		return replicateAll(ctx, plan.targets, plan.compact, logger, leases, status, sf.fail)
	}
}

// replicateAll runs one replicated stream per database until ctx
// ends or one of them fails; the others then ship what they have and stop.
func replicateAll(ctx context.Context, targets []dbTarget, cc compact.Config, logger *slog.Logger, leases *sidecarLeases, status *sidecarStatus, ff failFlags) error {
	limitSidecarHeap()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stores := make([]replica.Store, len(targets))
	for i, t := range targets {
		s, err := replicaurl.Open(ctx, t.ReplicaURL)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Path, err)
		}
		defer s.Close()
		stores[i] = s
	}

	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = replicateOne(ctx, t, stores[i], cc, logger, leases, status, ff)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()

	fenced, unavailable, localDisk := false, "", ""
	var all []error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, engine.ErrFenced) {
			fenced = true
		}
		var ue *engine.UnavailableError
		if errors.As(err, &ue) && unavailable == "" {
			unavailable = fmt.Sprintf("sluice: REPLICA UNAVAILABLE: %s: no upload accepted by %s for %s (%s)",
				targets[i].Path, redactURL(targets[i].ReplicaURL), ue.For.Round(time.Second), shortCause(ue.Err))
			if errors.Is(ue.Err, engine.ErrLocalDisk) && localDisk == "" {
				localDisk = fmt.Sprintf("sluice: LOCAL DISK: %s: changes could not be kept for upload for %s (%s): free space beside the database or in the temp directory; the replica was not at fault",
					targets[i].Path, ue.For.Round(time.Second), shortCause(ue.Err))
			}
		}
		all = append(all, fmt.Errorf("%s: %w", targets[i].Path, err))
	}
	if fenced {
		fmt.Fprintln(os.Stderr, "sluice: FENCED: another writer owns a replica; this process shipped nothing it could not own and stopped:", errors.Join(all...))
		return exitError{code: exitFenced}
	}
	if localDisk != "" { // exit 1: the replica is usable
		fmt.Fprintln(os.Stderr, localDisk)
		return exitError{code: 1}
	}
	if unavailable != "" {
		fmt.Fprintln(os.Stderr, replicaShorten(unavailable))
		return exitError{code: exitReplica}
	}
	return errors.Join(all...)
}

// replicateOne takes path's lease (with -lease) and streams the database
// until ctx ends (package replicated: final upload, compaction flush, lease
// release). logger has no "db" attribute: the engine adds its own.
func replicateOne(ctx context.Context, t dbTarget, store replica.Store, cc compact.Config, logger *slog.Logger, leases *sidecarLeases, status *sidecarStatus, ff failFlags) error {
	if err := leases.acquire(ctx, t.Path, store, logger); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the lease: nothing was shipped
		}
		return err
	}
	var w *watch.Watch
	s := replicated.NewStream(t.Path, replicated.Options{
		Name:       t.Path,
		Logger:     logger,
		Store:      store,
		Lease:      leases.take(t.Path), // released by the stream, after its final upload and compaction
		Compaction: &replicated.Compaction{Config: cc},
	}, replicated.StreamOptions{
		Interval:    t.SyncInterval,
		ErrorBudget: ff.effectiveBudget(),
		OnResult:    func(err error) { w.Observe(err) },
	})
	w = watch.New(s.Store(), ff.budget)
	status.add(t.Path, s, w)
	if status != nil && status.probe {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go w.Run(wctx)
	}
	return s.Run(ctx)
}

// sidecarHeapLimit is the sidecar's soft heap target. Its working set is a
// few bounded buffers per database, so a garbage heap far above it is only
// delay in collection — which a 512 MiB container beside its app cannot spare.
const sidecarHeapLimit = 48 << 20

// limitSidecarHeap sets the soft heap limit unless the operator chose one
// with GOMEMLIMIT.
func limitSidecarHeap() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(sidecarHeapLimit)
	}
}
