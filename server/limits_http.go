package server

import (
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/units"
)

// HTTPLimits bound what one connection, one answer and one token may cost
// the server (the limits: section, inline): a client that does not read, a
// body that never ends, a token creating databases in a loop, a flood of
// names in metrics labels.
type HTTPLimits struct {
	// MaxConnections caps open client connections (WebSockets included);
	// one more is answered 503 and closed (default 1024).
	MaxConnections int `yaml:"max-connections"`
	// MaxResponseBytes caps one answer (the JSON API's and Hrana's): a
	// larger one is refused as SQLITE_TOOBIG (default 8 MiB, or
	// max-body-bytes when that is larger).
	MaxResponseBytes units.Size `yaml:"max-response-bytes"`
	// BodyReadTimeout: a request body must arrive whole within this long
	// (408 otherwise; default 30s).
	BodyReadTimeout Duration `yaml:"body-read-timeout"`
	// WriteTimeout: an answer whose client takes no 64 KiB of it for this
	// long is abandoned and the connection closed (default 30s).
	WriteTimeout Duration `yaml:"write-timeout"`
	// MaxDatabases caps the databases this server holds (default 10000);
	// MaxDatabasesPerToken the databases one credential may create
	// (default 1000). Negative: no limit.
	MaxDatabases         int `yaml:"max-databases"`
	MaxDatabasesPerToken int `yaml:"max-databases-per-token"`
	// MaxWebSocketsPerToken: WebSocket connections one credential (without
	// credentials: one client address) holds at once; the next hello is
	// refused naming the limit (default 64).
	MaxWebSocketsPerToken int `yaml:"max-websockets-per-token"`
	// MetricsDatabases: databases with series of their own on /metrics;
	// the others are aggregated under db="_other" (default 256).
	MetricsDatabases int `yaml:"metrics-databases"`
}

// The defaults keep a 2-core, 512 MB instance answering everyone while one
// client misbehaves.
const (
	DefaultMaxConnections       = 1024
	DefaultMaxResponseBytes     = 8 << 20
	DefaultBodyReadTimeout      = 30 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
	DefaultMaxDatabases         = 10000
	DefaultMaxDatabasesPerToken = 1000
	DefaultMetricsDatabases     = 256
	DefaultMaxWebSocketsPerTok  = 64
)

// httpLimits is l with every default filled in; a negative count or
// duration means no limit (returned as 0).
func (l HTTPLimits) withDefaults() HTTPLimits {
	intDef := func(v *int, def int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = 0
		}
	}
	durDef := func(v *Duration, def time.Duration) {
		switch {
		case *v == 0:
			*v = Duration(def)
		case *v < 0:
			*v = 0
		}
	}
	intDef(&l.MaxConnections, DefaultMaxConnections)
	intDef(&l.MaxDatabases, DefaultMaxDatabases)
	intDef(&l.MaxDatabasesPerToken, DefaultMaxDatabasesPerToken)
	intDef(&l.MetricsDatabases, DefaultMetricsDatabases)
	intDef(&l.MaxWebSocketsPerToken, DefaultMaxWebSocketsPerTok)
	durDef(&l.BodyReadTimeout, DefaultBodyReadTimeout)
	durDef(&l.WriteTimeout, DefaultWriteTimeout)
	switch {
	case l.MaxResponseBytes == 0:
		l.MaxResponseBytes = DefaultMaxResponseBytes
	case l.MaxResponseBytes < 0:
		l.MaxResponseBytes = 0
	}
	return l
}

func (l HTTPLimits) check() error {
	if l.MaxResponseBytes > 0 && l.MaxResponseBytes < 4096 {
		return fmt.Errorf("max-response-bytes %d: give at least 4KiB (negative: no limit)", int64(l.MaxResponseBytes))
	}
	return nil
}
