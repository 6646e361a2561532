package main

import (
	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server"
)

// serveLimitFlags binds the flags of what one connection, answer and token
// may cost (limits: in the config).
func serveLimitFlags(b *configFlags) {
	l := func(c *server.Config) *server.HTTPLimits { return &c.Limits.HTTPLimits }
	b.Int("max-connections", 0, "client connections open at once, WebSockets included; one more is answered 503 (0: the default, 1024; negative: no limit)", func(c *server.Config) *int { return &l(c).MaxConnections }, nil)
	b.Size("max-response-size", "largest answer of one request (JSON API, Hrana); a larger one is refused as SQLITE_TOOBIG naming limits.max-response-bytes (default 8MiB, or -max-body-size when larger)", func(c *server.Config) *units.Size { return &l(c).MaxResponseBytes })
	b.Duration("body-read-timeout", 0, "a request body must arrive whole within this long, else 408 (0: the default, 30s; negative: none)", func(c *server.Config) *server.Duration { return &l(c).BodyReadTimeout }, nil)
	b.Duration("write-timeout", 0, "drop a connection whose client takes no 64 KiB of an answer for this long (0: the default, 30s; negative: none)", func(c *server.Config) *server.Duration { return &l(c).WriteTimeout }, nil)
	b.Int("max-databases", 0, "databases this server holds; a create past it is refused 403 (0: the default, 10000; negative: no limit)", func(c *server.Config) *int { return &l(c).MaxDatabases }, nil)
	b.Int("max-databases-per-token", 0, "databases one token (or JWT subject) may create (0: the default, 1000; negative: no limit)", func(c *server.Config) *int { return &l(c).MaxDatabasesPerToken }, nil)
	b.Int("max-websockets-per-token", 0, "WebSocket connections one token (without tokens: one client address) holds at once (0: the default, 64; negative: no limit)", func(c *server.Config) *int { return &l(c).MaxWebSocketsPerToken }, nil)
	b.Int("metrics-databases", 0, "databases with series of their own on /metrics; the rest are summed under db=\"_other\" (0: the default, 256)", func(c *server.Config) *int { return &l(c).MetricsDatabases }, nil)
}
