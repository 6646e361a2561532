package server

import "github.com/sluicedb/sluice/server/sqlconn"

// DefaultMaxValueBytes is SQLite's length limit on the server's connections
// unless configured: twice the default request body, so every value a
// client can send fits, and far below SQLite's own gigabyte, whose
// allocations hold SQLite's process-wide allocator lock (every other
// database's statements wait) and cost as much memory again on every copy.
const DefaultMaxValueBytes = 16 << 20

// applySQLiteLimits sets the limits every SQLite connection the server
// opens from now on gets.
func applySQLiteLimits(l Limits) {
	n := int64(l.MaxValueBytes)
	if n == 0 {
		n = DefaultMaxValueBytes
	}
	sqlconn.SetMaxLength(n, "limits.max-value-bytes")
}

// maxPinnedDatabases is the cap on databases one token (or client address)
// holds sessions on: configured, or half the open-database cap (at most 8),
// so that one client never holds every slot.
func maxPinnedDatabases(l Limits, maxOpen int) int {
	if l.MaxPinnedDatabases > 0 {
		return l.MaxPinnedDatabases
	}
	return min(8, max(1, maxOpen/2))
}
