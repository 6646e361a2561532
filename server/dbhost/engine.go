package dbhost

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// EngineReplication wires the host to the capture engine and restore.
// compact adds compaction and retention per database (nil: none).
func EngineReplication(logger *slog.Logger, compact func(store replica.Store, name string) (func(replica.LTXFile), func(bool))) Replication {
	if logger == nil {
		logger = slog.Default()
	}
	return Replication{
		Open: func(ctx context.Context, path string, store replica.Store, requireMatch bool, onShip func(replica.LTXFile)) (Replicator, error) {
			db, err := engine.Open(ctx, path, store, engine.Options{
				Logger:       logger,
				RequireMatch: requireMatch,
				OnShip:       onShip,
			})
			if err != nil {
				return nil, err
			}
			return db, nil
		},
		Restore: func(ctx context.Context, store replica.Store, path string) error {
			res, err := restore.Restore(ctx, store, path, restore.Options{Logger: logger})
			if err != nil {
				return err
			}
			// The engine continues from the restored TXID only if it knows the
			// file is exactly that state (LTX files carry no rolling checksum).
			return engine.RecordPosition(path, store.String(), res.Pos)
		},
		Compact:     compact,
		IsFenced:    func(err error) bool { return errors.Is(err, engine.ErrFenced) },
		IsDiverged:  func(err error) bool { return errors.Is(err, engine.ErrDiverged) },
		IsNoReplica: func(err error) bool { return errors.Is(err, restore.ErrNoReplica) },
	}
}
