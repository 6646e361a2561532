package dbhost

import (
	"context"
	"log/slog"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/restore"
)

// EngineReplication replicates with the capture engine and restores with
// package restore. compaction adds compaction and retention per database
// (nil: none).
func EngineReplication(logger *slog.Logger, compaction *replicated.Compaction) Replication {
	if logger == nil {
		logger = slog.Default()
	}
	verified := &verifiedFiles{}
	return Replication{
		Logger: logger,
		Restore: func(ctx context.Context, store replica.Store, path string) error {
			verified.take(path) // what an earlier restore of path read says nothing now
			res, err := restore.Restore(ctx, store, path, restore.Options{Logger: logger})
			if err != nil {
				return err
			}
			verified.put(path, res.Files)
			// The engine continues from the restored TXID only if it knows the
			// file is exactly that state (LTX files carry no rolling checksum).
			return engine.RecordPosition(path, store.String(), res.Pos)
		},
		Compaction: compaction,
		verified:   verified,
	}
}
