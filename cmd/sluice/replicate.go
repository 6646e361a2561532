package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/replica/watch"
)

func init() {
	register(command{name: "replicate", summary: "stream a database another process writes to a replica (sidecar)", run: runReplicate})
}

// exitFenced is the exit code when another writer took over the replica.
const exitFenced = 3

type sidecarFlags struct {
	configPath       string
	syncInterval     time.Duration
	snapshotInterval time.Duration
	retention        time.Duration
	l0Retention      time.Duration
	verbose          bool
	lease            leaseFlags
	fail             failFlags
}

func (f *sidecarFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.configPath, "config", "", "YAML config listing databases and replicas (Litestream's dbs: shape works)")
	fs.DurationVar(&f.syncInterval, "interval", time.Second, "ship committed changes at least this often")
	fs.DurationVar(&f.snapshotInterval, "snapshot-interval", 0, "write a full snapshot this often (default 1h)")
	fs.DurationVar(&f.retention, "retention", 0, "keep what restores any point in this window (default 24h)")
	fs.DurationVar(&f.l0Retention, "l0-retention", 0, "keep per-sync files this long after compaction (default 5m)")
	fs.BoolVar(&f.verbose, "v", false, "log every shipped file")
	f.lease.register(fs)
	f.fail.register(fs)
}

// resolve turns flags/config/positional args into targets plus compaction settings.
func (f *sidecarFlags) resolve(args []string) ([]dbTarget, compact.Config, error) {
	var cc compact.Config
	var targets []dbTarget
	switch {
	case f.configPath != "" && len(args) > 0:
		return nil, cc, fmt.Errorf("give either -config or DB_PATH REPLICA_URL, not both")
	case f.configPath != "":
		cfg, err := loadSidecarConfig(f.configPath)
		if err != nil {
			return nil, cc, err
		}
		if targets, err = cfg.targets(); err != nil {
			return nil, cc, err
		}
		cc.SnapshotInterval = time.Duration(cfg.SnapshotInterval)
		cc.Retention = time.Duration(cfg.Retention)
		cc.L0Retention = time.Duration(cfg.L0Retention)
	case len(args) == 2:
		targets = []dbTarget{{Path: args[0], ReplicaURL: args[1]}}
	default:
		return nil, cc, fmt.Errorf("want DB_PATH REPLICA_URL or -config FILE")
	}
	for i := range targets {
		if targets[i].SyncInterval == 0 {
			targets[i].SyncInterval = f.syncInterval
		}
	}
	if f.snapshotInterval > 0 {
		cc.SnapshotInterval = f.snapshotInterval
	}
	if f.retention > 0 {
		cc.Retention = f.retention
	}
	if f.l0Retention > 0 {
		cc.L0Retention = f.l0Retention
	}
	return targets, cc, nil
}

func newLogger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func runReplicate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("replicate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: sluice replicate [flags] DB_PATH REPLICA_URL\n       sluice replicate -config sluice.yml\n\nChecks that the replica can be listed and written, then ships every commit of the\ndatabase to it until SIGTERM/SIGINT, ships everything left and exits 0.\n\n"+exitCodes+"\n\nFlags:")
		fs.PrintDefaults()
	}
	var sf sidecarFlags
	sf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	targets, cc, err := sf.resolve(fs.Args())
	if err != nil {
		fs.Usage()
		return err
	}
	logger := newLogger(sf.verbose)
	if err := preflight(ctx, targets, sf.fail, false, logger); err != nil {
		return err
	}
	status := newSidecarStatus(targets, sf.fail)
	if sf.fail.addr != "" {
		if err := status.serve(ctx, sf.fail.addr, logger); err != nil {
			return err
		}
	}
	leases := newSidecarLeases(sf.lease)
	defer leases.releaseAll(logger)
	return replicateAll(ctx, targets, cc, logger, leases, status, sf.fail)
}

// replicateAll runs one replicator (and its compactor) per database until ctx
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

	fenced, unavailable := false, ""
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
		}
		all = append(all, fmt.Errorf("%s: %w", targets[i].Path, err))
	}
	if fenced {
		fmt.Fprintln(os.Stderr, "sluice: FENCED: another writer owns a replica; this process shipped nothing it could not own and stopped:", errors.Join(all...))
		return exitError{code: exitFenced}
	}
	if unavailable != "" {
		fmt.Fprintln(os.Stderr, replicaShorten(unavailable))
		return exitError{code: exitReplica}
	}
	return errors.Join(all...)
}

// logger has no "db" attribute: the engine adds its own.
func replicateOne(ctx context.Context, t dbTarget, store replica.Store, cc compact.Config, logger *slog.Logger, leases *sidecarLeases, status *sidecarStatus, ff failFlags) error {
	dbLog := logger.With("db", t.Path)
	if err := leases.acquire(ctx, t.Path, store, logger); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the lease: nothing was shipped
		}
		return err
	}
	defer leases.release(t.Path, dbLog) // after the final upload and compaction
	store = leases.guard(t.Path, store)
	comp := compact.New(store, cc, dbLog)
	// The background compactor stops at SIGTERM: a merge in progress gives
	// way to the final upload instead of delaying the exit.
	compCtx, stopComp := context.WithCancel(ctx)
	compDone := make(chan error, 1)
	go func() { compDone <- comp.Run(compCtx) }()
	defer func() {
		stopComp()
		<-compDone
	}()

	w := watch.New(store, ff.budget)
	r := engine.NewReplicator(t.Path, store, engine.ReplicatorOptions{
		Interval:    t.SyncInterval,
		Logger:      logger,
		ErrorBudget: ff.effectiveBudget(),
		OnResult:    w.Observe,
		OnShip: func(f replica.LTXFile) {
			comp.Notify(f)
		},
	})
	status.add(t.Path, r, w)
	if status != nil && status.probe {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go w.Run(wctx)
	}
	dbLog.Info("replicating", "replica", store.String(), "interval", t.SyncInterval)
	if err := r.Run(ctx); err != nil {
		h := r.Health()
		dbLog.Error("stopped replicating; changes after shipped_txid are NOT in the replica",
			"replica", store.String(), "shipped_txid", h.Pos.TXID.String(), "unshipped_bytes", h.UnshippedBytes)
		return err
	}
	h := r.Health()
	// A graceful stop folds this run's per-sync files into one, so the next
	// boot restores from a few objects rather than one per sync.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := comp.Flush(fctx, time.Now()); err != nil {
		dbLog.Warn("could not compact on shutdown; every change was shipped, only restores read more files", "err", err)
	}
	if h.Pos.TXID == 0 {
		dbLog.Info("stopped; the database never existed, nothing to ship", "replica", store.String())
	} else {
		dbLog.Info("stopped; every change is in the replica", "replica", store.String(), "shipped_txid", h.Pos.TXID.String())
	}
	return nil
}

// flushTimeout bounds the shutdown compaction: exit comes within half a
// second of the final upload (Cloud Run allows 10 s after SIGTERM, and a
// replica left uncompacted is complete; restores only read more files).
const flushTimeout = 500 * time.Millisecond

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
