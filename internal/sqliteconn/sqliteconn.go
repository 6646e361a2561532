// Package sqliteconn opens and closes zombiezen SQLite connections under one
// process-wide lock. zombiezen.com/go/sqlite keeps each connection's
// authorizer, busy handler and table entry in global maps keyed by the
// connection's C address, and Conn.Close deletes those entries only after
// freeing the connection: a connection opened by another goroutine in that
// window can get the same address and lose its entries (its authorizer
// callback then dereferences nil and the process crashes). A server that
// opens and closes databases all the time hits it within minutes. Holding
// one lock across OpenConn and across Close makes the free and the deletes
// one step as far as any open is concerned; settings made later on a live
// connection are safe without it.
//
// It imports only zombiezen.com/go/sqlite (and its modernc engine, to read
// SQLite's memory statistics); every package that opens SQLite
// connections in a long-running process uses it.
package sqliteconn

import (
	"sync"

	"zombiezen.com/go/sqlite"
)

var mu sync.Mutex

// Open is sqlite.OpenConn under the lock.
func Open(path string, flags ...sqlite.OpenFlags) (*sqlite.Conn, error) {
	mu.Lock()
	defer mu.Unlock()
	return sqlite.OpenConn(path, flags...)
}

// Close is c.Close under the lock.
func Close(c *sqlite.Conn) error {
	mu.Lock()
	defer mu.Unlock()
	return c.Close()
}
