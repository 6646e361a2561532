package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluicedb/sluice/replica"
)

// GuardStore returns store refusing every write (create, replace, delete)
// once l is no longer valid: lost, released, or past its local deadline.
// Reads pass through. The lease itself is renewed through the store it was
// taken on, not through the guard.
//
// A refused write is a *RefusedError. For a history object (under
// replica.LTXDir) it also matches replica.ErrExists, which the engine treats
// like a lost conditional create: it stops shipping as fenced, never under
// another name. This is the one place where "once the lease is lost, nothing
// more is written to the history" is enforced.
func GuardStore(store replica.Store, l *Lease) replica.Store {
	return &guardedStore{Store: store, lease: l}
}

// RefusedError is a write the guard refused because the lease no longer
// holds. It matches ErrLost, and replica.ErrExists for history objects.
type RefusedError struct {
	Key   string
	Store string
	// Cause says why the lease ended (it wraps ErrLost); nil when only its
	// local deadline passed without a renewal.
	Cause error
}

func (e *RefusedError) Error() string {
	why := ErrLost.Error() + " (no renewal before its local deadline)"
	if e.Cause != nil {
		why = e.Cause.Error()
	}
	msg := why + ": " + e.Key + " in " + e.Store + " not written"
	if e.history() {
		msg += " (" + replica.ErrExists.Error() + ")"
	}
	return msg
}

func (e *RefusedError) Unwrap() []error {
	if e.history() {
		return []error{ErrLost, replica.ErrExists}
	}
	return []error{ErrLost}
}

func (e *RefusedError) history() bool { return strings.HasPrefix(e.Key, replica.LTXDir+"/") }

type guardedStore struct {
	replica.Store
	lease *Lease
}

func (s *guardedStore) check(ctx context.Context, key string) error {
	if s.lease.Valid() {
		return nil
	}
	if s.lease.Suspended() {
		// The next renewal tells whether the lease still holds (a paused
		// process learns it at once): wait for it rather than leave the
		// caller to guess whether its write will ever ship.
		if err := s.lease.awaitRenewal(ctx); err != nil {
			return fmt.Errorf("%w: %s in %s not written yet (%v)", ErrSuspended, key, s.Store.String(), err)
		}
		if s.lease.Valid() {
			return nil
		}
	}
	return &RefusedError{Key: key, Store: s.Store.String(), Cause: s.lease.Err()}
}

// ErrSuspended: the lease was not renewed before its deadline; writes wait
// until a renewal resumes it (nobody took it) or it is lost.
var ErrSuspended = errors.New("the lease was not renewed before its deadline: writes wait until it is renewed or passes to another instance")

func (s *guardedStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if err := s.check(ctx, key); err != nil {
		return replica.ObjectInfo{}, err
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

func (s *guardedStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if err := s.check(ctx, key); err != nil {
		return replica.ObjectInfo{}, err
	}
	return s.Store.PutIfMatch(ctx, key, r, size, etag)
}

func (s *guardedStore) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if err := s.check(ctx, key); err != nil {
		return replica.ObjectInfo{}, err
	}
	return s.Store.Put(ctx, key, r, size)
}

func (s *guardedStore) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return s.Store.Delete(ctx)
	}
	if err := s.check(ctx, keys[0]); err != nil {
		return err
	}
	return s.Store.Delete(ctx, keys...)
}
