package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
)

// Leases in sidecar mode (-lease): a replicating process first takes the
// database's lease in the bucket (package lease), so two overlapping
// containers (an old and a new revision during a deploy) cannot both ship. The
// second waits for the first to release it on exit (or for it to expire),
// or with -lease-fail-fast exits at once. `sluice run` takes the lease
// before its boot restore, so it restores the first container's final state.
// Once the lease is lost, the store refuses every write (lease.GuardStore,
// through package replicated: an LTX create fails as if the key were taken,
// so the engine stops as fenced: exit 3).

// exitLeaseHeld is the exit code of -lease-fail-fast when another process holds the lease.
const exitLeaseHeld = 4

type leaseFlags struct {
	on       bool
	failFast bool
	ttl      time.Duration
}

func (f *leaseFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "lease", false, "take the database's lease in the bucket before replicating; wait while another process holds it")
	fs.BoolVar(&f.failFast, "lease-fail-fast", false, "with -lease: exit (code 4) instead of waiting when another process holds the lease")
	fs.DurationVar(&f.ttl, "lease-ttl", lease.DefaultTTL, "with -lease: lease time-to-live (renewed every third of it)")
}

// check refuses the lease's tuning without -lease: a second process started
// with -lease-fail-fast alone would otherwise replicate beside the holder.
func (f *leaseFlags) check(cmd string, fs *flag.FlagSet) error {
	for _, name := range []string{"lease-fail-fast", "lease-ttl"} {
		if flagSet(fs, name) && !f.on {
			return usagef(cmd, "-%s needs -lease", name)
		}
	}
	if f.ttl <= 0 {
		return usagef(cmd, "-lease-ttl %s: give a positive duration", f.ttl)
	}
	return nil
}

// sidecarLeases holds the leases a sidecar process took, per database path
// (nil without -lease). A held lease is waited for in the foreground
// (lease.Table.Acquire) or, with -lease-fail-fast, ends the process.
type sidecarLeases struct {
	failFast bool
	table    *lease.Table
}

func newSidecarLeases(f leaseFlags, log *slog.Logger) *sidecarLeases {
	if !f.on {
		return nil
	}
	opts := lease.Options{Holder: lease.NewHolderID(), TTL: f.ttl, Logger: log}
	return &sidecarLeases{failFast: f.failFast, table: lease.NewTable(opts, log, nil)}
}

// acquire takes path's lease on store (waiting unless fail-fast); a no-op
// without -lease or if already held.
func (s *sidecarLeases) acquire(ctx context.Context, path string, store replica.Store, log *slog.Logger) error {
	if s == nil || s.table.Lease(path) != nil {
		return nil
	}
	var err error
	if s.failFast {
		_, err = s.table.TryAcquire(ctx, path, store)
		var held *lease.HeldError
		if errors.As(err, &held) {
			fmt.Fprintf(os.Stderr, "sluice: LEASE HELD: %s: %v; -lease-fail-fast: not waiting\n", path, err)
			return exitError{code: exitLeaseHeld}
		}
	} else {
		logged := false
		err = s.table.Acquire(ctx, path, store, func(r lease.Record) {
			if !logged {
				log.Info("another process holds the database's lease; waiting for it", "db", path, "holder", r.Holder, "expires", r.Expires)
				logged = true
			}
		})
	}
	if err != nil {
		return fmt.Errorf("%s: take the lease: %w", path, err)
	}
	return nil
}

// take hands path's lease over to the stream that replicates it, which
// releases it after its final upload (nil without -lease).
func (s *sidecarLeases) take(path string) *lease.Lease {
	if s == nil {
		return nil
	}
	return s.table.Take(path)
}

// releaseAll gives up the leases no stream took (on exit).
func (s *sidecarLeases) releaseAll() {
	if s != nil {
		s.table.Close()
	}
}
