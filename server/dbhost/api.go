// Package dbhost hosts many SQLite databases for the HTTP front ends: it opens,
// creates, restores and deletes them, runs reads on a pool of read connections,
// groups concurrent writes into one transaction and one durable upload, and
// gives interactive sessions a dedicated connection.
//
// It imports engine, restore and replica; the HTTP packages (jsonapi, hrana)
// import it and never the other way round.
package dbhost

import (
	"context"
	"time"
)

// ValueType is SQLite's storage class of a value.
type ValueType int

// The five SQLite storage classes.
const (
	Null ValueType = iota
	Integer
	Float
	Text
	Blob
)

// Value is one SQLite value, exactly as stored (no conversion of dates,
// booleans or large integers).
type Value struct {
	Type  ValueType
	Int   int64
	Float float64
	Text  string
	Blob  []byte
}

// Stmt is one SQL statement with positional and/or named arguments.
// Named argument keys include their prefix (":name", "@name", "$name").
type Stmt struct {
	SQL       string
	Args      []Value
	NamedArgs map[string]Value
	WantRows  bool // false: rows are stepped but not returned
	// StrictArgs makes a parameter left without an argument an error
	// (CodeArgsInvalid) instead of NULL, as Hrana requires.
	StrictArgs bool
	// Rows, if set with WantRows, receives the columns and then each row as
	// it is stepped, and Result.Rows stays empty: a front end encodes rows
	// straight into its answer, with no value copied per row. A statement
	// run again (a multi-statement text, a write group re-run) calls
	// Columns again: the writer starts its result over.
	Rows RowWriter
}

// RowWriter receives a statement's result as it is stepped (Stmt.Rows).
type RowWriter interface {
	Columns(cols []Column)
	Row(r *Row)
}

// Column describes one result column.
type Column struct {
	Name     string
	DeclType string
}

// Result is the outcome of one statement.
type Result struct {
	Columns         []Column
	Rows            [][]Value
	Changes         int64
	LastInsertRowID int64
	RowsRead        int64
	RowsWritten     int64
	Duration        time.Duration
}

// Description is the outcome of describing (preparing, not running) a statement.
type Description struct {
	Params   []string // parameter names, "" for positional
	Columns  []Column
	ReadOnly bool
	Explain  bool
}

// Conn runs statements on one SQLite connection. It is only valid inside the
// callback (or session) that handed it out.
type Conn interface {
	Exec(ctx context.Context, st Stmt) (Result, error)
	Describe(ctx context.Context, sql string) (Description, error)
	// Autocommit reports whether no transaction is open on the connection.
	Autocommit() bool
}

// Bookmark is the replication position (TXID) a response reflects.
type Bookmark uint64

// BookmarkHeader is the HTTP header that carries a Bookmark: on every
// answer, and on a read that must see at least that position.
const BookmarkHeader = "Sluice-Bookmark"

// Database is one hosted database.
type Database interface {
	Name() string
	// Read runs fn on a read-only pooled connection; it never waits for the writer.
	Read(ctx context.Context, fn func(Conn) error) (Bookmark, error)
	// Write runs fn in the next write group: if fn returns an error only its
	// own changes are rolled back. It returns once the group is durable (sync:
	// uploaded; async: committed locally). fn may be called more than once (the
	// group is re-run without a failed request), so it must derive everything
	// from Conn and overwrite, not append to, what it reports. Transaction
	// control (BEGIN/COMMIT/ROLLBACK) is refused inside fn; SAVEPOINT works.
	// When the commit succeeded but its upload failed, the error is a
	// *NotDurableError carrying the commit's bookmark: not safe to run again.
	// A ctx made with WithIdempotency stores the answer with the write and
	// replays it for a retry with the same key.
	Write(ctx context.Context, fn func(Conn) error) (Bookmark, error)
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
	Conn
	Close(ctx context.Context) (Bookmark, error)
	// StateChanged reports whether the connection differs from a fresh one
	// (a connection-state pragma was changed, or TEMP objects exist). A
	// client that keeps a session while it does sees its own settings and
	// TEMP objects in later requests, as on a connection to a local file.
	StateChanged() bool
}

// Errors with a stable code, for the HTTP layers to map to statuses.
type Error struct {
	Code    string // e.g. SQLITE_ERROR, SQLITE_CONSTRAINT, TIMEOUT, FORBIDDEN, NOT_FOUND, UNAVAILABLE
	Message string
	Status  int // suggested HTTP status
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }
