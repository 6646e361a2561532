package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replica"
)

// compaction returns the per-database compaction starter for dbhost, or nil
// when disabled: one compact.Compactor per open database, notified of every
// shipped file (so its steady state makes no LIST). It runs only while the
// database is open; a closed (idle) database has no goroutine or timer.
func compaction(cfg Compaction, logger *slog.Logger) func(replica.Store, string) (func(replica.LTXFile), func()) {
	if cfg.Disabled {
		return nil
	}
	cc := compact.Config{SnapshotInterval: time.Duration(cfg.SnapshotInterval), Retention: time.Duration(cfg.Retention)}
	return func(store replica.Store, name string) (func(replica.LTXFile), func()) {
		c := compact.New(store, cc, logger.With("db", name))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := c.Run(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("compaction stopped", "db", name, "err", err)
			}
		}()
		var shipped atomic.Int64
		notify := func(f replica.LTXFile) { shipped.Add(1); c.Notify(f) }
		return notify, func() {
			cancel()
			<-done
			// The database is closing (idle, or shutdown): merge what it shipped
			// while open, as the sidecar does on exit, so that a closed database
			// leaves few objects and nothing for a timer to do. One file or none:
			// nothing to merge, and no request.
			if shipped.Load() < 2 {
				return
			}
			fctx, fcancel := context.WithTimeout(context.Background(), flushTimeout)
			defer fcancel()
			if err := c.Flush(fctx, time.Now()); err != nil {
				logger.Warn("could not compact a closing database; the replica is complete, only restores read more files", "db", name, "err", err)
			}
		}
	}
}

// flushTimeout bounds the compaction of a closing database.
const flushTimeout = 5 * time.Second
