package main

import (
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server"
)

// isolationFlags binds serve's flags for the limits that keep one client's
// SQL and sessions from costing the others.
func isolationFlags(b *configFlags) {
	b.Size("max-value-bytes", "largest string, blob or row a statement may build or read; past it SQLite answers SQLITE_TOOBIG (default 16MiB; negative: SQLite's own, about 1GB)", func(c *server.Config) *units.Size { return &c.Limits.MaxValueBytes })
	b.Duration("idle-write-timeout", 250*time.Millisecond, "roll back an interactive transaction that holds a database's write lock with no statement running this long while other writers wait (negative: never)", func(c *server.Config) *server.Duration { return &c.Limits.IdleWriteTimeout }, nil)
	b.Int("max-pinned-databases", 0, "databases one token (or client address, without tokens) may hold open streams with transactions or changed settings on (0: half of -max-open-databases, at most 8)", func(c *server.Config) *int { return &c.Limits.MaxPinnedDatabases }, nil)
	b.Duration("pinned-session-idle", time.Second, "when every open database is in use, close a database's streams' connections that hold no transaction and ran nothing for this long", func(c *server.Config) *server.Duration { return &c.Limits.PinnedSessionIdle }, nil)
	b.Int("max-pipeline-statements", 0, "statements (execute requests and batch steps) in one Hrana HTTP pipeline; a longer one is refused with 413 (0: the default, 10000)", func(c *server.Config) *int { return &c.Limits.MaxPipelineStatements }, nil)
	b.Int("max-concurrent-long-pipelines", 0, "Hrana pipelines of more than 100 statements running at once across the server; others wait (0: half the CPUs, at least 1)", func(c *server.Config) *int { return &c.Limits.MaxConcurrentLongPipelines }, nil)
}
