package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

func init() {
	register(command{
		name:    "run",
		summary: "container entrypoint: restore if missing, replicate while COMMAND runs",
		usage: `sluice run [flags] [-config FILE | -db PATH -replica URL] [--] COMMAND [ARGS...]

Restores each database that is missing locally and exists in its replica, then runs
COMMAND while replicating, forwards signals to it, ships everything once it exits,
and exits with its exit code. The replica is checked before COMMAND starts; if no
upload is accepted for -replica-error-budget, COMMAND gets SIGTERM and sluice exits 5.
Flags go before COMMAND: everything from COMMAND on is the application's.

` + exitCodes,
		setup:        setupRun,
		longRunning:  true,
		argsEndFlags: true,
	})
}

// forwardedSignals reach the child; the child decides when to exit, and
// sluice ships everything after it has.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func setupRun(fs *flag.FlagSet) runFunc {
	var sf sidecarFlags
	sf.register(fs)
	return func(ctx context.Context, args []string) error {
		if err := sf.check("run", fs); err != nil {
			return err
		}
		plan, err := sf.resolve("run", nil)
		if err != nil {
			return err
		}
		switch {
		case len(args) > 0:
		case plan.exec != "":
			if args, err = splitCommandLine(plan.exec); err != nil {
				return fmt.Errorf("exec %q: %w", plan.exec, err)
			}
		default:
			return usagef("run", "missing COMMAND: sluice run [flags] -- COMMAND [ARGS...]")
		}
		return superviseApp(ctx, &sf, plan, args)
	}
}

// restoreMissing restores each database missing locally that exists in its
// replica (only those with restore-if-db-not-exists unless all), and records
// the position so replication continues instead of re-uploading. With
// -lease the lease comes first, so the restore sees the previous holder's
// final upload. The returned func closes the stores, which keep the leases
// renewed until then.
func restoreMissing(ctx context.Context, targets []dbTarget, lf leaseFlags, leases *sidecarLeases, logger *slog.Logger, all bool) (func(), error) {
	var stores []replica.Store
	closeAll := func() {
		for _, s := range stores {
			s.Close()
		}
	}
	for _, t := range targets {
		if !all && !t.RestoreIfMissing {
			continue
		}
		if _, err := os.Stat(t.Path); err == nil && !lf.on {
			continue
		}
		store, err := replicaurl.Open(ctx, t.ReplicaURL)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", t.Path, err)
		}
		stores = append(stores, store)
		if err := leases.acquire(ctx, t.Path, store, logger); err != nil {
			closeAll()
			return nil, err
		}
		if _, err := os.Stat(t.Path); err == nil {
			continue
		}
		res, err := restore.Restore(ctx, store, t.Path, restore.Options{Logger: logger,
			Progress: logProgress(logger, "restoring on boot", t.Path, 10*time.Second)})
		switch {
		case errors.Is(err, restore.ErrNoReplica):
			logger.Info("no replica yet; starting with a new database", "db", t.Path)
		case err != nil:
			closeAll()
			return nil, fmt.Errorf("restore %s on boot: %w", t.Path, err)
		default:
			logger.Info("restored on boot", "db", t.Path, "txid", res.Pos.TXID.String(), "files", len(res.Files))
			if err := engine.RecordPosition(t.Path, store.String(), res.Pos); err != nil {
				logger.Warn("cannot record the restored position", "err", err)
			}
		}
	}
	return closeAll, nil
}

// superviseApp restores what is missing, then runs the application cmdArgs
// while replicating, and returns its exit code once everything is shipped.
func superviseApp(ctx context.Context, sf *sidecarFlags, plan *sidecarPlan, cmdArgs []string) error {
	targets, cc, logger := plan.targets, plan.compact, plan.logger
	// Nothing starts before the paths and replicas are known to work.
	if err := preflight(ctx, targets, sf.fail, true, logger); err != nil {
		return err
	}
	status := newSidecarStatus(targets, sf.fail)
	if sf.fail.addr != "" {
		sctx, stopStatus := context.WithCancel(context.WithoutCancel(ctx))
		defer stopStatus()
		if err := status.serve(sctx, sf.fail.addr, logger); err != nil {
			return err
		}
	}
	leases := newSidecarLeases(sf.lease, logger)
	defer leases.releaseAll()
	closeStores, err := restoreMissing(ctx, targets, sf.lease, leases, logger, true)
	if err != nil {
		return err
	}
	defer closeStores()

	// Replication outlives the signal that stops the child: it ships after the child exits.
	repCtx, stopRep := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRep()
	repDone := make(chan error, 1)
	go func() { repDone <- replicateAll(repCtx, targets, cc, logger, leases, status, sf.fail) }()

	child := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if err := child.Start(); err != nil {
		stopRep()
		<-repDone
		return fmt.Errorf("start %s: %w", cmdArgs[0], err)
	}
	waitDone := make(chan error, 1)
	go func() { waitDone <- child.Wait() }()

	var waitErr, repErr error
	repFinished := false
loop:
	for {
		select {
		case s := <-sigs:
			_ = child.Process.Signal(s)
		case waitErr = <-waitDone:
			break loop
		case repErr = <-repDone:
			// Replication stopped while the app runs (e.g. fenced): the app's writes
			// would no longer be durable, so stop it rather than lose them silently.
			repFinished = true
			logger.Error("replication stopped; terminating the application", "err", repErr)
			_ = child.Process.Signal(syscall.SIGTERM)
			waitErr = <-waitDone
			break loop
		}
	}
	if !repFinished {
		stopRep()
		repErr = <-repDone
	}
	code := 0
	if waitErr != nil {
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) {
			return waitErr
		}
		code = ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	}
	if repErr != nil {
		var ex exitError
		if errors.As(repErr, &ex) {
			return repErr
		}
		return fmt.Errorf("replication: %w", repErr)
	}
	if code != 0 {
		return exitError{code: code}
	}
	return nil
}
