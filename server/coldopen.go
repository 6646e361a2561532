package server

import (
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server/coldopen"
)

// ColdOpen is the config's cold-open section: a database that exists only
// in the bucket answers reads at once, page by page, while it is restored
// (on by default; zero sizes: 32 MiB of cached pages, 256 KiB read ahead).
type ColdOpen struct {
	Enabled    bool       `yaml:"enabled"`
	CacheBytes units.Size `yaml:"cache-bytes"`
	ReadAhead  units.Size `yaml:"read-ahead"`
}

// coldOpenOptions is dbhost's cold-open setting; nil when off.
func coldOpenOptions(cfg Config) *coldopen.Options {
	if !cfg.ColdOpen.Enabled {
		return nil
	}
	return &coldopen.Options{
		CacheBytes:       int64(cfg.ColdOpen.CacheBytes),
		ReadAhead:        int64(cfg.ColdOpen.ReadAhead),
		ReadConns:        cfg.Limits.ReadConnections,
		StatementTimeout: time.Duration(cfg.Limits.StatementTimeout),
	}
}

// pastOnDemand is the time-travel cache's on-demand setting: cold open's,
// with a quarter of its page cache per past state being restored.
func pastOnDemand(cfg Config) *coldopen.Options {
	o := coldOpenOptions(cfg)
	if o != nil {
		o.CacheBytes = max(int64(cfg.ColdOpen.CacheBytes), 32<<20) / 2
		o.ReadConns = 2
	}
	return o
}
