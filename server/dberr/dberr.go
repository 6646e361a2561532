// Package dberr is the error vocabulary of the server's domain packages
// (sqlconn, dbhost) and of its HTTP front ends: the stable codes a client
// reads in an error answer, the sentinels callers test with errors.Is, and
// the Error type that carries a code, a message and the object it names.
// It knows nothing of HTTP: server/httperr maps codes to statuses.
package dberr

import (
	"errors"
	"strings"
)

// Stable error codes beyond SQLite's own (SQLITE_CONSTRAINT_UNIQUE, ...,
// which pass through as SQLite names them).
const (
	CodeTimeout     = "TIMEOUT"
	CodeForbidden   = "FORBIDDEN"
	CodeNotFound    = "NOT_FOUND"
	CodeExists      = "ALREADY_EXISTS"
	CodeUnavailable = "UNAVAILABLE"
	CodeBadRequest  = "BAD_REQUEST"
	CodeBadName     = "BAD_NAME"
	CodeInternal    = "INTERNAL"
	// CodeArgsInvalid: the arguments do not match the statement's parameters
	// (Stmt.StrictArgs), worded and coded as sqld reports it.
	CodeArgsInvalid = "ARGS_INVALID"
	// CodeNotDurable: the write committed locally but is not in the bucket
	// yet. It is not an invitation to retry (see groupcommit.NotDurableError).
	CodeNotDurable = "COMMITTED_NOT_DURABLE"
	// CodeNeedsOwnConnection: the statement changes the connection itself
	// (a connection-state pragma, a TEMP object) and was refused on a
	// connection other clients share. The HTTP layers run such requests on a
	// connection of their own; a client sees it only where none can be had.
	CodeNeedsOwnConnection = "NEEDS_OWN_CONNECTION"
	// CodeLagging: a read replica is behind the bookmark the client asked
	// for; the leader (or a later retry) can answer.
	CodeLagging = "LAGGING"
	// CodeNotLeader: this instance does not hold the database's writer
	// lease; the front door forwards the request when it can.
	CodeNotLeader = "NOT_LEADER"
	// CodeKeyReused: an Idempotency-Key came back with a different request.
	CodeKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodePointUnavailable: a read or branch named a past state the replica
	// does not hold (before retention's oldest, after the newest, or merged
	// away by compaction); the message names the states available.
	CodePointUnavailable = "POINT_UNAVAILABLE"
	// Codes only the HTTP front ends raise (before a request reaches a database).
	CodeTooLarge     = "TOO_LARGE"
	CodeUnauthorized = "UNAUTHORIZED"

	// Codes of the Hrana protocol, which its clients know (server/hrana).
	CodeInternalError      = "INTERNAL_ERROR"
	CodeProtocolError      = "PROTOCOL_ERROR"
	CodeStreamLimit        = "STREAM_LIMIT"
	CodeStreamClosed       = "STREAM_CLOSED"
	CodeSQLStoreFull       = "SQL_STORE_FULL"
	CodeTransactionTimeout = "TRANSACTION_TIMEOUT"
	CodeRequestTimeout     = "REQUEST_TIMEOUT"
	CodeMethodNotAllowed   = "METHOD_NOT_ALLOWED"

	// SQLite's primary codes the server raises itself.
	CodeSQLiteError    = "SQLITE_ERROR"
	CodeSQLiteReadOnly = "SQLITE_READONLY"
	CodeSQLitePrefix   = "SQLITE_"
)

// Sentinels, one per kind of failure a caller acts on; an *Error matches the
// sentinel of its code with errors.Is.
var (
	ErrTimeout            = errors.New("timed out")
	ErrForbidden          = errors.New("forbidden")
	ErrNotFound           = errors.New("not found")
	ErrExists             = errors.New("already exists")
	ErrUnavailable        = errors.New("unavailable")
	ErrBadRequest         = errors.New("bad request")
	ErrInternal           = errors.New("internal error")
	ErrNeedsOwnConnection = errors.New("needs a connection of its own")
	ErrNotDurable         = errors.New("committed but not durable")
	ErrLagging            = errors.New("replica lagging")
	ErrNotLeader          = errors.New("not the leader")
	ErrPointUnavailable   = errors.New("point in time unavailable")
	// ErrReadOnly matches every SQLITE_READONLY* code: a write attempted on a
	// read-only connection.
	ErrReadOnly = errors.New("read-only")
)

var sentinels = map[string]error{
	CodeTimeout: ErrTimeout, CodeForbidden: ErrForbidden, CodeNotFound: ErrNotFound,
	CodeExists: ErrExists, CodeUnavailable: ErrUnavailable, CodeBadRequest: ErrBadRequest,
	CodeInternal: ErrInternal, CodeNeedsOwnConnection: ErrNeedsOwnConnection,
	CodeNotDurable: ErrNotDurable, CodeLagging: ErrLagging, CodeNotLeader: ErrNotLeader,
	CodePointUnavailable: ErrPointUnavailable,
}

// Error is a failure with a stable code, for clients to act on.
type Error struct {
	Code    string // e.g. SQLITE_ERROR, SQLITE_CONSTRAINT, TIMEOUT, FORBIDDEN, NOT_FOUND, UNAVAILABLE
	Message string
	// Name is the database the error is about, when it is about one.
	Name string
	// Err is the underlying cause, if any (Unwrap).
	Err error
}

// New returns an *Error with code and msg.
func New(code, msg string) *Error { return &Error{Code: code, Message: msg} }

// ForDatabase returns an *Error with code and msg about database name.
func ForDatabase(code, name, msg string) *Error { return &Error{Code: code, Name: name, Message: msg} }

func (e *Error) Error() string { return e.Code + ": " + e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of e's code.
func (e *Error) Is(target error) bool {
	if target == ErrReadOnly {
		return strings.HasPrefix(e.Code, CodeSQLiteReadOnly)
	}
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
