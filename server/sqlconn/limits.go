package sqlconn

import (
	"fmt"
	"sync/atomic"

	"zombiezen.com/go/sqlite"
)

// maxLength is SQLite's length limit (SQLITE_LIMIT_LENGTH) set on every
// connection this package opens: the largest string, blob or row a
// statement may build or read. SQLite's own is about 1 GB, and building a
// value that large holds SQLite's process-wide allocator lock across each
// reallocation (every other database's statements wait) and takes as much
// memory again on every copy. 0: SQLite's own.
var maxLength atomic.Int64

// scratchKeep is the largest row scratch buffer a connection keeps between
// statements: a client that read one huge value must not leave a buffer as
// large as it on every pooled connection until the database closes.
const scratchKeep = 1 << 20

// SetMaxLength sets the length limit of every connection opened from now on
// (n ≤ 0: SQLite's own) and the name of the setting that a refused statement's
// error names.
func SetMaxLength(n int64, setting string) {
	if n < 0 {
		n = 0
	}
	maxLength.Store(n)
	if setting != "" {
		lengthSetting.Store(&setting)
	}
}

var lengthSetting atomic.Pointer[string]

// applyLimits sets the configured limits on c.
func applyLimits(c *sqlite.Conn) {
	if n := maxLength.Load(); n > 0 {
		c.Limit(sqlite.LimitLength, int32(min(n, 1<<31-1)))
	}
}

// tooBigMessage is the message of SQLITE_TOOBIG: SQLite's own words plus the
// limit that refused the value, so a client knows what to change.
func tooBigMessage(msg string) string {
	n := maxLength.Load()
	if n <= 0 {
		return msg
	}
	name := "the server's value size limit"
	if p := lengthSetting.Load(); p != nil {
		name = *p
	}
	return fmt.Sprintf("%s: a string, blob or row would exceed %d bytes (%s)", msg, n, name)
}
