// Package dbhost is the server's registry of databases for the HTTP front
// ends: it opens, creates, restores, deletes and evicts them, runs reads on a
// pool of read connections, hands writes to each database's write path
// (server/groupcommit), gives interactive sessions a dedicated connection,
// and holds the leases of multi-instance mode. The read replicas of the
// databases other instances write are package server/followers's.
//
// It imports sqlconn (the connection layer), groupcommit, engine, restore,
// replica and coldopen (reads on a database still being restored);
// the HTTP packages (jsonapi, hrana) import it and never the other way round.
// Its errors are dberr codes and sentinels; server/httperr maps them to HTTP.
package dbhost

import (
	"context"

	"github.com/sluicedb/sluice/server/sqlconn"
)

// Bookmark is the replication position (TXID) a response reflects.
type Bookmark uint64

// BookmarkHeader is the HTTP header that carries a Bookmark: on every
// answer, and on a read that must see at least that position.
const BookmarkHeader = "Sluice-Bookmark"

// Database is one hosted database.
type Database interface {
	Name() string
	// Read runs fn on a read-only pooled connection; it never waits for the writer.
	Read(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error)
	// Write runs fn in the next write group: if fn returns an error only its
	// own changes are rolled back. It returns once the group is durable (sync:
	// uploaded; async: committed locally). fn may be called more than once (the
	// group is re-run without a failed request), so it must derive everything
	// from the Conn and overwrite, not append to, what it reports. Transaction
	// control (BEGIN/COMMIT/ROLLBACK) is refused inside fn; SAVEPOINT works.
	// When the commit succeeded but its upload failed, the error is a
	// *groupcommit.NotDurableError carrying the commit's bookmark (its TXID):
	// not safe to run again. A ctx made with groupcommit.WithIdempotency
	// stores the answer with the write and replays it for a retry with the
	// same key.
	Write(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error)
	// Session gives a dedicated writer connection for interactive transactions
	// (BEGIN ... COMMIT across requests). While a session holds a transaction,
	// write groups wait. An Exec that commits (COMMIT, or a write in autocommit
	// mode) returns only once that commit is durable, like a write group. Close
	// commits nothing: it rolls back any open transaction and returns the
	// bookmark (everything committed was already shipped by Exec).
	Session(ctx context.Context) (Session, error)
}

// Session is an interactive connection; see Database.Session.
type Session interface {
	sqlconn.Conn
	Close(ctx context.Context) (Bookmark, error)
	// StateChanged reports whether the connection differs from a fresh one
	// (a connection-state pragma was changed, or TEMP objects exist). A
	// client that keeps a session while it does sees its own settings and
	// TEMP objects in later requests, as on a connection to a local file.
	StateChanged() bool
}
