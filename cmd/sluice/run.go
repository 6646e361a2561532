package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

func init() {
	register(command{name: "run", summary: "container entrypoint: restore if missing, replicate while COMMAND runs", run: runRun})
}

// forwardedSignals reach the child; the child decides when to exit, and
// sluice ships everything after it has.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func runRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var sf sidecarFlags
	sf.register(fs)
	var dbPath, replicaURL string
	fs.StringVar(&dbPath, "db", "", "database path (instead of -config)")
	fs.StringVar(&replicaURL, "replica", "", "replica URL (with -db)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: sluice run [-config FILE | -db PATH -replica URL] [flags] -- COMMAND [ARGS...]\n\nRestores each database that is missing locally and exists in its replica, then runs\nCOMMAND while replicating, forwards signals to it, ships everything once it exits,\nand exits with its exit code. The replica is checked before COMMAND starts; if no\nupload is accepted for -replica-error-budget, COMMAND gets SIGTERM and sluice exits 5.\n\n"+exitCodes+"\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		fs.Usage()
		return fmt.Errorf("missing COMMAND after --")
	}
	var pos []string
	if dbPath != "" || replicaURL != "" {
		if dbPath == "" || replicaURL == "" {
			return fmt.Errorf("-db and -replica go together")
		}
		pos = []string{dbPath, replicaURL}
	}
	targets, cc, err := sf.resolve(pos)
	if err != nil {
		return err
	}
	logger := newLogger(sf.verbose)
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
	leases := newSidecarLeases(sf.lease)
	defer leases.releaseAll(logger)

	// Restore on boot (seed 000's entrypoint): only what is missing locally.
	for _, t := range targets {
		if _, err := os.Stat(t.Path); err == nil && !sf.lease.on {
			continue
		}
		store, err := replicaurl.Open(ctx, t.ReplicaURL)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Path, err)
		}
		defer store.Close() // also renews the lease until exit
		// With -lease the lease comes first, so the restore sees the previous holder's final upload.
		if err := leases.acquire(ctx, t.Path, store, logger); err != nil {
			return err
		}
		if _, err := os.Stat(t.Path); err == nil {
			continue
		}
		res, err := restore.Restore(ctx, store, t.Path, restore.Options{Logger: logger})
		switch {
		case errors.Is(err, restore.ErrNoReplica):
			logger.Info("no replica yet; starting with a new database", "db", t.Path)
		case err != nil:
			return fmt.Errorf("restore %s on boot: %w", t.Path, err)
		default:
			logger.Info("restored on boot", "db", t.Path, "txid", res.Pos.TXID.String(), "files", len(res.Files))
			// Replication then continues from this TXID instead of re-uploading.
			if err := engine.RecordPosition(t.Path, store.String(), res.Pos); err != nil {
				logger.Warn("cannot record the restored position", "err", err)
			}
		}
	}

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
