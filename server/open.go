package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluicedb/sluice/replica/replicaurl"
)

// New opens the replica at cfg.Replica (empty: DefaultReplica(cfg.DataDir))
// and returns the server (see NewWithStore).
func New(ctx context.Context, cfg Config, logger *slog.Logger, version string) (*Server, error) {
	if cfg.Replica == "" {
		cfg.Replica = DefaultReplica(cfg.DataDir)
	}
	store, err := replicaurl.Open(ctx, cfg.Replica)
	if err != nil {
		return nil, fmt.Errorf("open replica %s: %w", cfg.Replica, err)
	}
	s, err := NewWithStore(cfg, store, logger, version)
	if err != nil {
		store.Close()
	}
	return s, err
}
