package dbhost

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"zombiezen.com/go/sqlite"
)

// Stable error codes beyond SQLite's own.
const (
	CodeTimeout     = "TIMEOUT"
	CodeForbidden   = "FORBIDDEN"
	CodeNotFound    = "NOT_FOUND"
	CodeExists      = "ALREADY_EXISTS"
	CodeUnavailable = "UNAVAILABLE"
	CodeBadRequest  = "BAD_REQUEST"
	// CodeArgsInvalid: the arguments do not match the statement's parameters
	// (Stmt.StrictArgs), worded and coded as sqld reports it.
	CodeArgsInvalid = "ARGS_INVALID"
	// CodeNotDurable: the write committed locally but is not in the bucket
	// yet. It is not an invitation to retry (see NotDurableError).
	CodeNotDurable = "COMMITTED_NOT_DURABLE"
	// CodeNeedsOwnConnection: the statement changes the connection itself
	// (a connection-state pragma, a TEMP object) and was refused on a
	// connection other clients share. The HTTP layers run such requests on a
	// connection of their own; a client sees it only where none can be had.
	CodeNeedsOwnConnection = "NEEDS_OWN_CONNECTION"
)

func needsOwnConnection(why string) *Error {
	return errorf(CodeNeedsOwnConnection, http.StatusBadRequest, why+
		": it runs only on a connection of the client's own (a Hrana stream or a JSON API request gets one when it needs it)")
}

// IsInternalError reports whether err is a failure of the server rather
// than of the statement (a panic recovered in the SQLite layer).
func IsInternalError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == "INTERNAL"
}

// IsOwnConnectionError reports whether err refused a statement only because
// it ran on a shared connection; run the request on a Session instead.
func IsOwnConnectionError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeNeedsOwnConnection
}

// NotDurableError answers a write that committed locally but whose upload
// failed: the data stays and the next successful upload ships it, so running
// the write again would apply it twice. Its status is 500 ("outcome not
// confirmed") without Retry-After; Bookmark is the commit's position, durable
// once the database's durable bookmark reaches it. The HTTP layers answer it
// with the bookmark so the client can ask later, or retry with the same
// Idempotency-Key, which replays instead of running again.
type NotDurableError struct {
	Err      *Error
	Bookmark Bookmark
}

func (e *NotDurableError) Error() string { return e.Err.Error() }
func (e *NotDurableError) Unwrap() error { return e.Err }

func notDurable(db string, b Bookmark, cause error) *NotDurableError {
	return &NotDurableError{Bookmark: b, Err: errorf(CodeNotDurable, http.StatusInternalServerError,
		"database "+quote(db)+": the write was committed locally but the upload to the replica failed ("+cause.Error()+
			"); it is kept and shipped by the next successful upload, so do not run it again: it is durable once the database's durable bookmark reaches "+
			strconv.FormatUint(uint64(b), 10)+" (GET /v1/databases/"+db+"/bookmark/"+strconv.FormatUint(uint64(b), 10)+"), or retry with the same Idempotency-Key")}
}

func errorf(code string, status int, msg string) *Error {
	return &Error{Code: code, Status: status, Message: msg}
}

// sqlError turns an error from zombiezen into an *Error with SQLite's code
// name (SQLITE_CONSTRAINT_UNIQUE, ...) and a fitting HTTP status. timedOut
// says whether the statement deadline (not the caller) fired.
func sqlError(err error, timedOut bool) error {
	return sqlErrorWhy(err, timedOut, "")
}

// sqlErrorWhy is sqlError with the guard's reason for a refused statement.
func sqlErrorWhy(err error, timedOut bool, why string) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code := sqlite.ErrCode(err)
	msg := sqliteMessage(err.Error(), code)
	switch {
	case code == sqlite.ResultInterrupt && timedOut:
		return errorf(CodeTimeout, http.StatusRequestTimeout,
			"statement interrupted: it ran longer than the server's statement time limit")
	case code == sqlite.ResultInterrupt || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return errorf(CodeTimeout, http.StatusRequestTimeout, "statement interrupted: the request was cancelled or timed out")
	case strings.HasSuffix(msg, "not authorized") && code.ToPrimary() == sqlite.ResultError:
		// load_extension() reports this: extension loading is disabled.
		return errorf(CodeForbidden, http.StatusForbidden, "statement refused: loading extensions is disabled on this server")
	case code == sqlite.ResultAuth && why != "":
		return errorf(CodeForbidden, http.StatusForbidden, "statement refused: "+why)
	case code == sqlite.ResultAuth:
		return errorf(CodeForbidden, http.StatusForbidden,
			msg+" (ATTACH, DETACH, VACUUM INTO, load_extension and pragmas outside the safe list are refused)")
	}
	status := http.StatusBadRequest
	switch code.ToPrimary() {
	case sqlite.ResultConstraint:
		status = http.StatusConflict
	case sqlite.ResultBusy, sqlite.ResultLocked:
		status = http.StatusServiceUnavailable
	case sqlite.ResultReadOnly:
		status = http.StatusForbidden
	case sqlite.ResultIOErr, sqlite.ResultCorrupt, sqlite.ResultFull, sqlite.ResultNoMem, sqlite.ResultCantOpen, sqlite.ResultInternal:
		status = http.StatusInternalServerError
	}
	name := code.String()
	if !strings.HasPrefix(name, "SQLITE_") {
		name = "SQLITE_ERROR"
	}
	return errorf(name, status, msg)
}

// sqliteMessage recovers SQLite's own message (what sqlite3_errmsg says, and
// what a client sees on a local file) from the driver's error text, which
// wraps it as `sqlite: [prepare["SQL"]: ][L:C: ][step: ]<code's generic
// text>: <message>`: clients compare and show SQLite's words, not ours.
func sqliteMessage(text string, code sqlite.ResultCode) string {
	rest := strings.TrimPrefix(text, "sqlite: ")
	if after, ok := strings.CutPrefix(rest, "prepare "); ok {
		if q, err := strconv.QuotedPrefix(after); err == nil {
			rest = strings.TrimPrefix(after[len(q):], ": ")
		}
	}
	rest = strings.TrimPrefix(rest, "prepare: ")
	if i := strings.Index(rest, ": "); i > 0 && isLineCol(rest[:i]) {
		rest = rest[i+2:]
	}
	for _, op := range []string{"step: ", "exec: ", "reset: ", "bind: "} {
		rest = strings.TrimPrefix(rest, op)
	}
	generic := code.Message()
	if m, ok := strings.CutPrefix(rest, generic+": "); ok && m != "" {
		return m
	}
	return rest
}

// isLineCol reports whether s is "line:column", as the driver places
// before a prepare error's message.
func isLineCol(s string) bool {
	l, c, ok := strings.Cut(s, ":")
	_, errL := strconv.Atoi(l)
	_, errC := strconv.Atoi(c)
	return ok && errL == nil && errC == nil
}
