package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/replica"
)

// Options choose what to restore and how.
type Options struct {
	TXID           ltx.TXID  // restore the state after this TXID; 0 = latest
	Timestamp      time.Time // restore the newest state at or before this time; zero = latest. Exclusive with TXID
	Parallelism    int       // downloads in flight (default 8)
	IntegrityCheck bool      // PRAGMA integrity_check on the result before it is renamed into place
	QuickCheck     bool      // PRAGMA quick_check instead (faster: skips matching indexes to tables); IntegrityCheck wins
	// Progress, if set, is called (never concurrently) as bytes arrive, and
	// once more at the end with doneBytes == totalBytes.
	Progress func(doneBytes, totalBytes int64)
	Logger   *slog.Logger
}

// DefaultParallelism is the number of downloads in flight when Options.Parallelism is 0.
const DefaultParallelism = 8

func (o Options) validate() error {
	if o.TXID != 0 && !o.Timestamp.IsZero() {
		return errors.New("restore: TXID and Timestamp are exclusive: give one or neither")
	}
	if o.Parallelism < 0 {
		return fmt.Errorf("restore: Parallelism %d must be >= 0", o.Parallelism)
	}
	return nil
}

func (o Options) parallelism() int {
	if o.Parallelism <= 0 {
		return DefaultParallelism
	}
	return o.Parallelism
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// Result describes a finished restore.
type Result struct {
	Pos      ltx.Pos           // TXID reached and the database checksum there
	Files    []replica.LTXFile // the plan that was applied, oldest first
	Bytes    int64             // bytes downloaded
	PageSize uint32
	Pages    uint32 // database size in pages
}

// Restore rebuilds the database described by opts at outPath, which must not
// exist. The output is written to a temp file beside outPath, fsynced, checked
// and only then moved into place; on any error outPath is left untouched and
// the temp file removed.
func Restore(ctx context.Context, store replica.Store, outPath string, opts Options) (Result, error) {
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	log := opts.logger()
	// Before anything else: a restore that is refused or fails still
	// clears what killed restores of the same output left behind.
	removeAbandonedTemps(outPath, log)
	if err := checkOutPath(outPath); err != nil {
		return Result{}, err
	}
	start := time.Now()
	files, target, partial, err := list(ctx, store, opts, false)
	if err != nil {
		return Result{}, err
	}

	tmp, err := createTemp(outPath)
	if err != nil {
		return Result{}, err
	}
	tmpPath := tmp.Name()
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			removeTemp(tmpPath)
		}
		tmp.unlock() // after the file is gone or renamed: no clean-up can take it before
	}()

	// A damaged or unreadable file is left out and the restore planned
	// again: the other levels covering its TXIDs take its place.
	var damaged []*fileError
	var plan []replica.LTXFile
	var img built
	for {
		if plan, err = planSorted(files, target); err != nil && partial {
			// The level-0 files the short listing left out may make a chain.
			skip := map[string]bool{}
			for _, fe := range damaged {
				skip[fe.file.Key] = true
			}
			if files, err = listAll(ctx, store, skip); err != nil {
				return Result{}, err
			}
			partial = false
			log.Debug("restore listed every level", "replica", store.String(), "files", len(files))
			continue
		}
		if err != nil {
			if len(damaged) > 0 {
				return Result{}, fmt.Errorf("plan restore from %s: %w", store, noFallback(damaged, target, err))
			}
			return Result{}, fmt.Errorf("plan restore from %s: %w", store, err)
		}
		log.Debug("restore plan", "replica", store.String(), "files", len(plan), "txid", plan[len(plan)-1].MaxTXID, "took", time.Since(start))
		if len(damaged) > 0 {
			if err := tmp.Truncate(0); err != nil {
				return Result{}, fmt.Errorf("restore %s: reset %s: %w", outPath, tmpPath, err)
			}
		}
		buildStart := time.Now()
		img, err = build(ctx, store, plan, tmp.File, opts)
		var fe *fileError
		if errors.As(err, &fe) && ctx.Err() == nil {
			log.Warn("damaged replica file left out; restoring from the other levels covering its TXIDs",
				"file", fe.file.Key, "level", fe.file.Level, "txids", fe.file.MinTXID.String()+"-"+fe.file.MaxTXID.String(), "err", fe.err)
			damaged = append(damaged, fe)
			files = without(files, fe.file.Key)
			continue
		}
		if err != nil {
			return Result{}, err
		}
		log.Debug("restore built", "pages", img.commit, "took", time.Since(buildStart))
		break
	}
	syncStart := time.Now()
	if err := tmp.Sync(); err != nil {
		return Result{}, fmt.Errorf("restore %s: fsync %s: %w", outPath, tmpPath, err)
	}
	if err := tmp.Close(); err != nil {
		return Result{}, fmt.Errorf("restore %s: close %s: %w", outPath, tmpPath, err)
	}
	log.Debug("restore fsynced", "took", time.Since(syncStart))
	if pragma := opts.checkPragma(); pragma != "" {
		checkStart := time.Now()
		if err := integrityCheck(tmpPath, pragma); err != nil {
			return Result{}, fmt.Errorf("restore %s from %s: the rebuilt database fails PRAGMA %s "+
				"although every checksum matched (the replica holds a damaged database): %w: %w", outPath, store, pragma, ErrIntegrity, err)
		}
		log.Debug("restore checked", "pragma", pragma, "took", time.Since(checkStart))
	}
	if err := moveIntoPlace(tmpPath, outPath); err != nil {
		return Result{}, err
	}
	done = true
	removeTemp(tmpPath) // only the -wal/-shm an integrity check may have left; the name itself is gone

	log.Info("restored", "path", outPath, "replica", store.String(), "txid", img.pos.TXID,
		"files", len(plan), "bytes", img.bytes, "pages", img.commit)
	return Result{Pos: img.pos, Files: plan, Bytes: img.bytes, PageSize: img.pageSize, Pages: img.commit}, nil
}

// checkOutPath refuses an existing output and a stale WAL beside a missing
// one: SQLite would replay that WAL into the restored database on first open.
func checkOutPath(outPath string) error {
	if _, err := os.Lstat(outPath); err == nil {
		return fmt.Errorf("restore: %s already exists: restore never overwrites a database; remove it or choose another output path", outPath)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("restore: check %s: %w", outPath, err)
	}
	if _, err := os.Lstat(outPath + "-wal"); err == nil {
		return fmt.Errorf("restore: %s-wal exists although %s does not: SQLite would replay that stale WAL into the restored database; "+
			"remove %s-wal and %s-shm first", outPath, outPath, outPath, outPath)
	}
	return nil
}

// moveIntoPlace links tmp to out, which fails if out appeared meanwhile (so
// a concurrent writer's file is never replaced), then removes tmp and fsyncs
// the directory. Filesystems without hard links fall back to a rename after
// a last existence check.
func moveIntoPlace(tmp, out string) error {
	if err := os.Link(tmp, out); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("restore: %s appeared while restoring; it was left untouched", out)
		}
		if _, statErr := os.Lstat(out); statErr == nil {
			return fmt.Errorf("restore: %s appeared while restoring; it was left untouched", out)
		}
		if err := os.Rename(tmp, out); err != nil {
			return fmt.Errorf("restore: rename %s to %s: %w", tmp, out, err)
		}
	} else if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("restore: remove temp name %s after linking %s: %w", tmp, out, err)
	}
	d, err := os.Open(filepath.Dir(out))
	if err != nil {
		return fmt.Errorf("restore: open directory of %s to fsync it: %w", out, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("restore: fsync directory of %s: %w", out, err)
	}
	return nil
}

// removeTemp removes the temp file and the -wal/-shm SQLite may have created
// beside it (never beside the user's output path).
func removeTemp(tmpPath string) {
	for _, p := range []string{tmpPath, tmpPath + "-wal", tmpPath + "-shm", tmpPath + "-journal"} {
		_ = os.Remove(p)
	}
}

// ErrIntegrity: the restored database failed the integrity check asked for,
// so it was not put in place.
var ErrIntegrity = errors.New("integrity check failed")

// checkPragma is the check to run on the result, or "" for none.
func (o Options) checkPragma() string {
	switch {
	case o.IntegrityCheck:
		return "integrity_check"
	case o.QuickCheck:
		return "quick_check"
	}
	return ""
}

// integrityCheck runs PRAGMA pragma (integrity_check or quick_check) on the
// database at path.
func integrityCheck(path, pragma string) error {
	conn, err := sqliteconn.Open(path, sqlite.OpenReadWrite)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer sqliteconn.Close(conn)
	var problems []string
	err = sqlitex.ExecuteTransient(conn, "PRAGMA "+pragma, &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error {
			if s := stmt.ColumnText(0); s != "ok" {
				problems = append(problems, s)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems, first: %s", len(problems), problems[0])
	}
	return nil
}

// countingReader reports bytes read to a progress tracker.
type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(int64(n))
	return n, err
}
