// Package replica defines the object-store contract every backend implements
// (file, S3, GCS, Azure) and the object layout sluice shares with Litestream v0.5.
//
// It imports only the standard library and github.com/superfly/ltx; backends live
// in sub-packages and import this one, never the other way round.
package replica

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors every Store returns (wrapped, so test them with errors.Is).
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: a conditional create found the key already taken.
	ErrExists = errors.New("object already exists")
	// ErrPreconditionFailed: a conditional replace found a different ETag.
	ErrPreconditionFailed = errors.New("object changed since it was read (precondition failed)")
)

// AfterLister is implemented by stores that can start a listing after a key
// (S3's StartAfter), so it skips what sorts before instead of fetching it.
type AfterLister interface {
	// ListAfter returns List(prefix) without the keys <= after.
	ListAfter(ctx context.Context, prefix, after string) ([]ObjectInfo, error)
}

// ListAfter returns the objects under prefix whose keys sort after after,
// asking the store to skip the others where it can.
func ListAfter(ctx context.Context, s Store, prefix, after string) ([]ObjectInfo, error) {
	if al, ok := s.(AfterLister); ok {
		return al.ListAfter(ctx, prefix, after)
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := objs[:0]
	for _, o := range objs {
		if o.Key > after {
			out = append(out, o)
		}
	}
	return out, nil
}

// ObjectInfo describes one stored object. Key is relative to the store's root.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
	ETag    string // opaque version token for PutIfMatch; "" if unknown
}

// Store is a flat key/value object store rooted at a prefix (a bucket path, a
// directory). Keys use '/' separators and never start with '/'.
//
// Implementations must be safe for concurrent use.
type Store interface {
	// PutIfAbsent writes the object only if no object exists at key (S3/Azure
	// If-None-Match: *, GCS DoesNotExist, file O_EXCL+link). If the key is taken
	// it returns an error wrapping ErrExists and leaves the existing object intact.
	// size is the exact length of r, or -1 if unknown.
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error)

	// PutIfMatch replaces the object only if its current ETag equals etag;
	// otherwise it returns an error wrapping ErrPreconditionFailed (or ErrNotFound
	// if the object is gone).
	PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (ObjectInfo, error)

	// Put writes the object unconditionally.
	Put(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error)

	// Get opens the whole object. A missing object is ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)

	// GetRange opens length bytes from offset; length < 0 reads to the end.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)

	// Stat returns the object's metadata. A missing object is ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)

	// Delete removes the objects; keys that do not exist are not an error.
	Delete(ctx context.Context, keys ...string) error

	// List returns every object whose key starts with prefix, sorted by key.
	// Never called on a hot path (see ARCHITECTURE.md, invariant 4).
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// String returns the store's URL, for messages.
	String() string

	// Close releases the store's resources.
	Close() error
}
