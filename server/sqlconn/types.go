// Package sqlconn is the server's SQLite connection layer: it opens a
// connection with sluice's settings and statement guard, runs statements
// with their arguments, time limit and cancellation, carries out libSQL's
// ALTER COLUMN, and translates SQLite's errors into dberr codes. It knows
// nothing of databases as a registry, of replication or of HTTP: dbhost
// pools its connections, and the HTTP front ends read its values and rows.
package sqlconn

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
