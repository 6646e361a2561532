package replica

import (
	"context"
	"errors"
	"strings"
)

// Classes of store failures. Backends wrap their SDK errors in a *StoreError
// whose Kind is one of these, so callers decide (stop now or retry later)
// with errors.Is and without reading SDK messages.
var (
	// ErrNoCredentials: no credentials were found, so no request could be signed.
	ErrNoCredentials = errors.New("no credentials found")
	// ErrAccessDenied: the store refused the credentials or the operation.
	ErrAccessDenied = errors.New("access denied")
	// ErrNoBucket: the bucket (container) does not exist.
	ErrNoBucket = errors.New("no such bucket")
	// ErrBadEndpoint: the endpoint's host name does not resolve or the URL is malformed.
	ErrBadEndpoint = errors.New("endpoint cannot be resolved")
	// ErrUnavailable: the store did not answer or answered with a server
	// error; retrying later may succeed.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNoConditionalWrites: the store let a create-if-absent replace an
	// object, so it cannot fence a second writer (see Probe).
	ErrNoConditionalWrites = errors.New("the store ignores conditional writes")
)

// StoreError is a classified store failure: one short cause and, for
// configuration errors, what to change.
type StoreError struct {
	Kind  error  // one of the Err* classes above
	Cause string // short: an error code and message, not a stack of retries
	Fix   string // what the operator should do; "" if nothing specific
}

func (e *StoreError) Error() string {
	s := e.Kind.Error()
	if e.Cause != "" {
		s += " (" + e.Cause + ")"
	}
	if e.Fix != "" {
		s += ": " + e.Fix
	}
	return s
}

func (e *StoreError) Unwrap() error { return e.Kind }

// Permanent reports whether err is a configuration error that retrying
// cannot fix: missing or rejected credentials, a missing bucket, a host
// that does not resolve, a local permission error, or a store without
// conditional writes.
func Permanent(err error) bool {
	switch {
	case err == nil, errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
	}
	return errors.Is(err, ErrNoCredentials) || errors.Is(err, ErrAccessDenied) ||
		errors.Is(err, ErrNoBucket) || errors.Is(err, ErrBadEndpoint) || errors.Is(err, ErrNoConditionalWrites)
}

// Shorten caps a cause taken from an SDK message at max bytes, on one line.
func Shorten(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
