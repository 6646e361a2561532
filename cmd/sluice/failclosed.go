package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/replica/watch"
)

// Fail closed: before an application runs against a database sluice cannot
// replicate, and whenever replication stops working for longer than the
// error budget, sluice says so in one line and exits non-zero.

// exitReplica is the exit code when the replica is unusable: a
// configuration error found at start, or no upload accepted for longer than
// the error budget.
const exitReplica = 5

// exitCodes is the table printed by `sluice help` and kept in README.
const exitCodes = `Exit codes:
  0  success (run: the application's own code when replication succeeded)
  1  error (bad database path, failed restore, final upload failed, ...)
  2  usage (unknown command, bad flag)
  3  fenced: another writer owns the replica
  4  lease held by another process (-lease-fail-fast)
  5  replica unusable: no credentials, no bucket, access denied, bad endpoint,
     no conditional writes, or no upload accepted within -replica-error-budget`

// failFlags are the fail-closed settings of replicate and run.
type failFlags struct {
	budget    time.Duration
	continue_ bool
	addr      string
}

func (f *failFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.budget, "replica-error-budget", watch.DefaultBudget, "stop (run: SIGTERM the application) and exit 5 after this long without an accepted upload while changes wait")
	fs.Func("on-replica-error", "exit (default): stop after the error budget; continue: log and keep retrying, never stop the application", func(v string) error {
		switch v {
		case "exit":
			f.continue_ = false
		case "continue":
			f.continue_ = true
		default:
			return fmt.Errorf("want exit or continue, not %q", v)
		}
		return nil
	})
	fs.StringVar(&f.addr, "addr", "", "serve /health, /ready and /metrics on this address (e.g. 127.0.0.1:9090)")
}

// effectiveBudget is the replicator's budget: zero (never give up) with -on-replica-error=continue.
func (f failFlags) effectiveBudget() time.Duration {
	if f.continue_ {
		return 0
	}
	return f.budget
}

// checkDBPath refuses a database path whose folder is missing (unless
// createDir: `run` on a fresh machine creates it, as restore does) or not
// writable, or that names a directory. A missing file is fine: the
// application creates it.
func checkDBPath(path string, createDir bool) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("database %s is a directory: give the path of the SQLite file", path)
	}
	if err := checkSQLiteHeader(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if createDir {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("database %s: create its folder: %w", path, err)
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("database %s: its folder %s does not exist: create it or correct the path", path, dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("database %s: %s is not a folder", path, dir)
	}
	f, err := os.CreateTemp(dir, ".sluice-check-*")
	if err != nil {
		return fmt.Errorf("database %s: cannot write in %s (SQLite needs it for the WAL): %v", path, dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// sqliteMagic opens every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// checkSQLiteHeader refuses a file that is there but is not an SQLite
// database (an empty file is a database SQLite has not written yet):
// replicating it could never succeed, and the application should not start
// on it as if it were replicated.
func checkSQLiteHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // missing: the application creates it; unreadable: opening says why
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, _ := io.ReadFull(f, head)
	if n == 0 || string(head[:n]) == sqliteMagic[:n] {
		return nil
	}
	return fmt.Errorf("database %s is not an SQLite database (it does not start with %q): give the path of the application's SQLite file", path, strings.TrimSuffix(sqliteMagic, "\x00"))
}

// preflight checks every target's database path and replica before anything
// runs: permanent errors end at once, transient ones are retried with backoff
// for up to the budget.
func preflight(ctx context.Context, targets []dbTarget, ff failFlags, createDirs bool, log *slog.Logger) error {
	for _, t := range targets {
		if err := checkDBPath(t.Path, createDirs); err != nil {
			return err
		}
	}
	for _, t := range targets {
		store, err := replicaurl.Open(ctx, t.ReplicaURL)
		if err != nil {
			return fmt.Errorf("%s: %w", t.Path, err)
		}
		err = probeStore(ctx, store, ff.budget, false, log)
		store.Close()
		if err == nil || ctx.Err() != nil {
			continue
		}
		if ff.continue_ {
			log.Error("replica unusable; continuing without replication as -on-replica-error=continue asks", "db", t.Path, "replica", store.String(), "err", err)
			continue
		}
		return replicaFailure(store.String(), err)
	}
	return ctx.Err()
}

// probeStore runs replica.Probe until it succeeds, fails permanently, or
// transient failures outlast budget. readOnly only lists.
func probeStore(ctx context.Context, store replica.Store, budget time.Duration, readOnly bool, log *slog.Logger) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var err error
		if readOnly {
			_, err = store.List(pctx, replica.ProbePrefix) // a read replica may hold read-only keys
		} else {
			err = replica.Probe(pctx, store)
		}
		cancel()
		if err == nil || replica.Permanent(err) || ctx.Err() != nil {
			return err
		}
		d := min(time.Second<<min(attempt-1, 5), 30*time.Second)
		d = d - d/4 + rand.N(d/2+1)
		if time.Since(start)+d > budget {
			return fmt.Errorf("unreachable for %s: %w", time.Since(start).Round(time.Second), err)
		}
		log.Warn("replica not reachable yet; retrying", "replica", store.String(), "err", err, "attempt", attempt, "in", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// replicaFailure prints the one line an operator needs and returns exit code 5.
func replicaFailure(url string, err error) error {
	var se *replica.StoreError
	if errors.As(err, &se) {
		fmt.Fprintf(os.Stderr, "sluice: replica %s: %v\n", url, se)
	} else {
		fmt.Fprintf(os.Stderr, "sluice: replica %s: %v\n", url, err)
	}
	return exitError{code: exitReplica}
}

// replicaShorten keeps an exit line readable: SDK causes are already short,
// but a wrapped chain of retries must not become a screenful.
func replicaShorten(s string) string { return replica.Shorten(s, 400) }

// checkDataDir refuses a data directory that cannot be created or written.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data directory %s: %v: create it or choose another -data", dir, errors.Unwrap(err))
	}
	f, err := os.CreateTemp(dir, ".sluice-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// preflightServe checks serve's replica like preflight does the sidecar's.
func preflightServe(ctx context.Context, url string, budget time.Duration, readOnly bool, log *slog.Logger) error {
	store, err := replicaurl.Open(ctx, url)
	if err != nil {
		return fmt.Errorf("open replica %s: %w", url, err)
	}
	defer store.Close()
	if err := probeStore(ctx, store, budget, readOnly, log); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return replicaFailure(store.String(), err)
	}
	return nil
}

// shortCause is the classified cause of a store failure, or the end of the
// error chain (the innermost message says what failed) kept short.
func shortCause(err error) string {
	var se *replica.StoreError
	if errors.As(err, &se) {
		return se.Error()
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return replica.Shorten(err.Error(), 200)
		}
		err = next
	}
}

// redactURL drops a replica URL's query (endpoint, credentials in some schemes).
func redactURL(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i]
	}
	return u
}
