package sqliteconn

import (
	"modernc.org/libc"
	sqlitelib "modernc.org/sqlite/lib"
)

// The SQLite build sluice links counts no memory by default
// (SQLITE_DEFAULT_MEMSTATUS=0), so its page caches, statements and schemas
// were invisible: outside the Go heap and unreported by SQLite. Turning the
// counters on before SQLite initialises (on the first open) makes
// MemoryUsed report them.
func init() {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(1))
	defer libc.Xfree(tls, va)
	sqlitelib.Xsqlite3_config(tls, sqlitelib.SQLITE_CONFIG_MEMSTATUS, va)
}

// MemoryUsed reports the bytes SQLite itself holds allocated (page caches,
// prepared statements, schemas) across every connection in the process.
func MemoryUsed() int64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlitelib.Xsqlite3_memory_used(tls)
}

// SetSoftHeapLimit asks SQLite to keep the memory it holds across every
// connection in the process near n bytes (0: no limit): past it, page
// caches recycle their own pages instead of growing. A server with many
// databases otherwise holds a full page cache per connection, and its memory
// grows with the databases until every cache is full. It returns the
// previous limit.
func SetSoftHeapLimit(n int64) int64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlitelib.Xsqlite3_soft_heap_limit64(tls, n)
}
