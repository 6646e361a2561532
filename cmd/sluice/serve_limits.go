package main

import (
	"flag"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server"
)

// serveLimitFlags registers the flags of what one connection, answer and
// token may cost (limits: in the config) and returns the function that
// applies one of them, by name, once it was set; false for other names.
func serveLimitFlags(fs *flag.FlagSet) func(name string, cfg *server.Config) bool {
	maxConns := fs.Int("max-connections", 0, "client connections open at once, WebSockets included; one more is answered 503 (0: the default, 1024; negative: no limit)")
	var maxResp units.Size
	fs.Var(&maxResp, "max-response-size", "largest answer of one request (JSON API, Hrana); a larger one is refused as SQLITE_TOOBIG naming limits.max-response-bytes (default 8MiB, or -max-body-size when larger)")
	bodyTimeout := fs.Duration("body-read-timeout", 0, "a request body must arrive whole within this long, else 408 (0: the default, 30s; negative: none)")
	writeTimeout := fs.Duration("write-timeout", 0, "drop a connection whose client takes no 64 KiB of an answer for this long (0: the default, 30s; negative: none)")
	maxDBs := fs.Int("max-databases", 0, "databases this server holds; a create past it is refused 403 (0: the default, 10000; negative: no limit)")
	perToken := fs.Int("max-databases-per-token", 0, "databases one token (or JWT subject) may create (0: the default, 1000; negative: no limit)")
	wsPerToken := fs.Int("max-websockets-per-token", 0, "WebSocket connections one token (without tokens: one client address) holds at once (0: the default, 64; negative: no limit)")
	metricsDBs := fs.Int("metrics-databases", 0, "databases with series of their own on /metrics; the rest are summed under db=\"_other\" (0: the default, 256)")
	return func(name string, cfg *server.Config) bool {
		l := &cfg.Limits.HTTPLimits
		switch name {
		case "max-connections":
			l.MaxConnections = *maxConns
		case "max-response-size":
			l.MaxResponseBytes = maxResp
		case "body-read-timeout":
			l.BodyReadTimeout = server.Duration(*bodyTimeout)
		case "write-timeout":
			l.WriteTimeout = server.Duration(*writeTimeout)
		case "max-databases":
			l.MaxDatabases = *maxDBs
		case "max-databases-per-token":
			l.MaxDatabasesPerToken = *perToken
		case "max-websockets-per-token":
			l.MaxWebSocketsPerToken = *wsPerToken
		case "metrics-databases":
			l.MetricsDatabases = *metricsDBs
		default:
			return false
		}
		return true
	}
}
