// Package httperr is where the server's errors become HTTP answers: the one
// table from a dberr code to a status (with a second column for statements
// on Hrana's v1 endpoints), and the headers that go with it. server/,
// server/hrana and server/jsonapi answer every domain error through it;
// nothing below them decides a status.
package httperr

import (
	"errors"
	"net/http"
	"strings"

	"github.com/sluicedb/sluice/server/dberr"
)

// statusByCode is the status of every code the server raises itself.
// SQLite's codes are mapped by their primary code (sqliteStatus); a code
// in neither is a client error.
var statusByCode = map[string]int{
	dberr.CodeBadRequest:         http.StatusBadRequest,
	dberr.CodeBadName:            http.StatusBadRequest,
	dberr.CodeArgsInvalid:        http.StatusBadRequest,
	dberr.CodeNeedsOwnConnection: http.StatusBadRequest,
	dberr.CodeUnauthorized:       http.StatusUnauthorized,
	dberr.CodeForbidden:          http.StatusForbidden,
	dberr.CodeNotFound:           http.StatusNotFound,
	dberr.CodeTimeout:            http.StatusRequestTimeout,
	dberr.CodeExists:             http.StatusConflict,
	dberr.CodeTooLarge:           http.StatusRequestEntityTooLarge,
	dberr.CodeKeyReused:          http.StatusUnprocessableEntity,
	dberr.CodePointUnavailable:   http.StatusUnprocessableEntity,
	// Not a 503: the write committed, so it is not to be retried.
	dberr.CodeNotDurable:  http.StatusInternalServerError,
	dberr.CodeInternal:    http.StatusInternalServerError,
	dberr.CodeUnavailable: http.StatusServiceUnavailable,
	dberr.CodeNotLeader:   http.StatusServiceUnavailable,
	dberr.CodeLagging:     http.StatusServiceUnavailable,
}

// sqliteStatus maps SQLite's primary codes to a status; the rest are 400.
var sqliteStatus = map[string]int{
	"CONSTRAINT": http.StatusConflict,
	"BUSY":       http.StatusServiceUnavailable, "LOCKED": http.StatusServiceUnavailable,
	"READONLY": http.StatusForbidden,
	"IOERR":    http.StatusInternalServerError, "CORRUPT": http.StatusInternalServerError,
	"FULL": http.StatusInternalServerError, "NOMEM": http.StatusInternalServerError,
	"CANTOPEN": http.StatusInternalServerError, "INTERNAL": http.StatusInternalServerError,
}

// statusOfCode is the HTTP status of an error with code.
func statusOfCode(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	if rest, ok := strings.CutPrefix(code, dberr.CodeSQLitePrefix); ok {
		primary, _, _ := strings.Cut(rest, "_")
		if s, ok := sqliteStatus[primary]; ok {
			return s
		}
	}
	return http.StatusBadRequest
}

// v1StatementStatus is the second column of the table: a statement's error
// on Hrana's v1 endpoints (/v1/execute, /v1/batch), where sqld answers
// whatever the client caused with 400 and only unavailability, timeouts and
// the server's own failures with another status.
var v1StatementStatus = map[string]int{
	dberr.CodeUnavailable:        http.StatusServiceUnavailable,
	dberr.CodeInternalError:      http.StatusInternalServerError,
	dberr.CodeNotDurable:         http.StatusInternalServerError,
	dberr.CodeKeyReused:          http.StatusUnprocessableEntity,
	dberr.CodePointUnavailable:   http.StatusUnprocessableEntity,
	dberr.CodeTimeout:            http.StatusRequestTimeout,
	dberr.CodeTransactionTimeout: http.StatusRequestTimeout,
	dberr.CodeRequestTimeout:     http.StatusRequestTimeout,
	dberr.CodeForbidden:          http.StatusForbidden,
	dberr.CodeNotFound:           http.StatusNotFound,
}

// V1StatementStatus is the status of a statement's error with code on
// Hrana's v1 endpoints: 400 unless v1StatementStatus says otherwise.
func V1StatementStatus(code string) int {
	if s, ok := v1StatementStatus[code]; ok {
		return s
	}
	return http.StatusBadRequest
}

// Status is the HTTP status err answers with: the status an edge handler
// chose (WithStatus), else its code's, else 500 for an error without a code.
func Status(err error) int {
	var s *statusError
	if errors.As(err, &s) {
		return s.status
	}
	if e := dberr.As(err); e != nil {
		return statusOfCode(e.Code)
	}
	return http.StatusInternalServerError
}

// Code is err's stable code, INTERNAL for an error without one.
func Code(err error) string {
	if e := dberr.As(err); e != nil {
		return e.Code
	}
	return dberr.CodeInternal
}

// Message is err's text for a client: an *Error's message, else err's text.
func Message(err error) string {
	if e := dberr.As(err); e != nil {
		return e.Message
	}
	return err.Error()
}

// SetRetryAfter tells a client to retry an unavailable answer after a second.
func SetRetryAfter(h http.Header, status int) {
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
}

// WithStatus makes err answer with status instead of its code's: the front
// door's own answers whose status says more than the code (a forwarding
// failure is 502, not the 503 of UNAVAILABLE).
func WithStatus(status int, err error) error { return &statusError{status: status, err: err} }

type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }
