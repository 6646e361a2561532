package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replica"
)

// compaction returns the per-database compaction starter for dbhost, or nil
// when disabled: one compact.Compactor per database replica, notified of
// every shipped file (so its steady state makes no LIST).
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
		return c.Notify, func() { cancel(); <-done }
	}
}
