package server

import (
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/metrics"
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

// registerColdOpen adds cold open's gauges: databases restoring while they
// answer on demand, and what on-demand reads (cold opens and past states)
// cost since the server started.
func (s *Server) registerColdOpen(reg *metrics.Registry) {
	one := func(f func() float64) func() []metrics.Sample {
		return func() []metrics.Sample { return []metrics.Sample{{Value: f()}} }
	}
	reg.GaugeFunc("sluice_cold_open_hydrating", "Databases answering reads page by page while they are restored.", nil, one(func() float64 {
		if s.host == nil {
			return 0
		}
		return float64(s.host.Hydrating())
	}))
	total := func(name, help string, f func(coldopen.Stats) int64) {
		reg.GaugeFunc(name, help, nil, one(func() float64 { return float64(f(coldopen.Totals())) }))
	}
	total("sluice_cold_open_views", "On-demand views opened since the server started (cold opens and past states read while restored).", func(t coldopen.Stats) int64 { return t.Views })
	total("sluice_cold_open_pages_fetched", "Pages decoded from the bucket on demand since the server started (read-ahead included).", func(t coldopen.Stats) int64 { return t.Fetched })
	total("sluice_cold_open_cache_hits", "Page reads on demand answered from the page cache since the server started.", func(t coldopen.Stats) int64 { return t.Hits })
	total("sluice_cold_open_cache_misses", "Page reads on demand that fetched from the bucket since the server started.", func(t coldopen.Stats) int64 { return t.Misses })
	total("sluice_cold_open_store_requests", "Range reads of the bucket for on-demand reads since the server started (page indexes included).", func(t coldopen.Stats) int64 { return t.Requests })
	total("sluice_cold_open_store_bytes", "Bytes those range reads returned.", func(t coldopen.Stats) int64 { return t.Bytes })
}
