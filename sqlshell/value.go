// Package sqlshell is sluice's SQL shell: one-shot statements and an
// interactive session (dot-commands, output modes, history, multi-line
// statements) over a Backend, which is either a local SQLite file opened
// directly or a database served by `sluice serve`, reached through its JSON
// API.
//
// It imports zombiezen.com/go/sqlite (through internal/sqliteconn) for local
// files and net/http for served databases; never engine, server or cmd.
package sqlshell

import (
	"context"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
)

// Kind is a value's SQLite storage class.
type Kind int

const (
	Null Kind = iota
	Integer
	Float
	Text
	Blob
)

// Value is one SQLite value.
type Value struct {
	Kind  Kind
	Int   int64
	Float float64
	Text  string
	Blob  []byte
}

// Result is what one statement produced.
type Result struct {
	Columns      []string
	Rows         [][]Value
	Changes      int64
	LastInsertID int64
}

// Backend runs SQL against one database.
type Backend interface {
	// Exec runs one complete statement.
	Exec(ctx context.Context, sql string) (Result, error)
	// Snapshot runs read-only queries in one read transaction, so their
	// results are one consistent state of the database.
	Snapshot(ctx context.Context, queries []string) ([]Result, error)
	// Backup writes a consistent copy of the database to path, which must
	// not exist. ErrNoDirectBackup: the shell rebuilds it from a dump.
	Backup(ctx context.Context, path string) error
	// Describe names the database, for messages.
	Describe() string
	Close() error
}

// display renders v for the table and line modes.
func (v Value) display() string {
	switch v.Kind {
	case Null:
		return "NULL"
	case Blob:
		return "X'" + strings.ToUpper(hex.EncodeToString(v.Blob)) + "'"
	}
	return v.plain()
}

// plain renders v without quoting: numbers and text as they are, NULL empty.
func (v Value) plain() string {
	switch v.Kind {
	case Integer:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		return formatFloat(v.Float)
	case Text:
		return v.Text
	case Blob:
		return string(v.Blob)
	}
	return ""
}

// literal renders v as an SQL literal that reads back as the same value.
func (v Value) literal() string {
	switch v.Kind {
	case Integer:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		switch {
		case math.IsInf(v.Float, 1):
			return "1e999"
		case math.IsInf(v.Float, -1):
			return "-1e999"
		case math.IsNaN(v.Float):
			return "NULL"
		}
		return formatFloat(v.Float)
	case Text:
		return quoteString(v.Text)
	case Blob:
		return "X'" + hex.EncodeToString(v.Blob) + "'"
	}
	return "NULL"
}

// formatFloat writes f so that it reads back as a float (never as "1").
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEIN") {
		s += ".0"
	}
	return s
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// QuoteIdent quotes an SQL identifier.
func QuoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
