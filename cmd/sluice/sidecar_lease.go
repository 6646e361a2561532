package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
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

// sidecarLeases holds the leases a sidecar process took, per database path.
type sidecarLeases struct {
	flags  leaseFlags
	holder string
	mu     sync.Mutex
	held   map[string]*lease.Lease
}

func newSidecarLeases(f leaseFlags) *sidecarLeases {
	return &sidecarLeases{flags: f, holder: lease.NewHolderID(), held: map[string]*lease.Lease{}}
}

// acquire takes path's lease on store (waiting unless fail-fast); a no-op
// without -lease or if already held.
func (s *sidecarLeases) acquire(ctx context.Context, path string, store replica.Store, log *slog.Logger) error {
	if s == nil || !s.flags.on {
		return nil
	}
	s.mu.Lock()
	have := s.held[path] != nil
	s.mu.Unlock()
	if have {
		return nil
	}
	opts := lease.Options{Holder: s.holder, TTL: s.flags.ttl, Logger: log}
	var l *lease.Lease
	var err error
	if s.flags.failFast {
		l, err = lease.TryAcquire(ctx, store, opts)
		var held *lease.HeldError
		if errors.As(err, &held) {
			fmt.Fprintf(os.Stderr, "sluice: LEASE HELD: %s: %v; -lease-fail-fast: not waiting\n", path, err)
			return exitError{code: exitLeaseHeld}
		}
	} else {
		logged := false
		l, err = lease.Acquire(ctx, store, opts, func(r lease.Record) {
			if !logged {
				log.Info("another process holds the database's lease; waiting for it", "db", path, "holder", r.Holder, "expires", r.Expires)
				logged = true
			}
		})
	}
	if err != nil {
		return fmt.Errorf("%s: take the lease: %w", path, err)
	}
	s.mu.Lock()
	s.held[path] = l
	s.mu.Unlock()
	return nil
}

// take hands path's lease over to the stream that replicates it, which
// releases it after its final upload (nil without -lease).
func (s *sidecarLeases) take(path string) *lease.Lease {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.held[path]
	delete(s.held, path)
	return l
}

// release gives path's lease up (after its final upload).
func (s *sidecarLeases) release(path string, log *slog.Logger) {
	if s == nil {
		return
	}
	s.mu.Lock()
	l := s.held[path]
	delete(s.held, path)
	s.mu.Unlock()
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		log.Warn("releasing the lease failed; the next holder waits for it to expire", "db", path, "err", err)
	}
}

func (s *sidecarLeases) releaseAll(log *slog.Logger) {
	if s == nil {
		return
	}
	s.mu.Lock()
	paths := make([]string, 0, len(s.held))
	for p := range s.held {
		paths = append(paths, p)
	}
	s.mu.Unlock()
	for _, p := range paths {
		s.release(p, log)
	}
}
