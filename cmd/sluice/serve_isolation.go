package main

import (
	"flag"
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server"
)

// isolationFlags registers serve's flags for the limits that keep one
// client's SQL and sessions from costing the others, and returns what
// applies the ones given on the command line to a config.
func isolationFlags(fs *flag.FlagSet) func(*server.Config) {
	var maxValue units.Size
	fs.Var(&maxValue, "max-value-bytes", "largest string, blob or row a statement may build or read; past it SQLite answers SQLITE_TOOBIG (default 16MiB; negative: SQLite's own, about 1GB)")
	idleWrite := fs.Duration("idle-write-timeout", 250*time.Millisecond, "roll back an interactive transaction that holds a database's write lock with no statement running this long while other writers wait (negative: never)")
	maxPinned := fs.Int("max-pinned-databases", 0, "databases one token (or client address, without tokens) may hold open streams with transactions or changed settings on (0: half of -max-open-databases, at most 8)")
	pinnedIdle := fs.Duration("pinned-session-idle", time.Second, "when every open database is in use, close a database's streams' connections that hold no transaction and ran nothing for this long")
	maxPipeline := fs.Int("max-pipeline-statements", 0, "statements (execute requests and batch steps) in one Hrana HTTP pipeline; a longer one is refused with 413 (0: the default, 10000)")
	longPipelines := fs.Int("max-concurrent-long-pipelines", 0, "Hrana pipelines of more than 100 statements running at once across the server; others wait (0: half the CPUs, at least 1)")
	return func(cfg *server.Config) {
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "max-value-bytes":
				cfg.Limits.MaxValueBytes = maxValue
			case "idle-write-timeout":
				cfg.Limits.IdleWriteTimeout = server.Duration(*idleWrite)
			case "max-pinned-databases":
				cfg.Limits.MaxPinnedDatabases = *maxPinned
			case "max-concurrent-long-pipelines":
				cfg.Limits.MaxConcurrentLongPipelines = *longPipelines
			case "max-pipeline-statements":
				cfg.Limits.MaxPipelineStatements = *maxPipeline
			case "pinned-session-idle":
				cfg.Limits.PinnedSessionIdle = server.Duration(*pinnedIdle)
			}
		})
	}
}
