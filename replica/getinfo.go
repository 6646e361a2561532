package replica

import (
	"context"
	"io"
)

// InfoGetter is a Store that can open an object and give its metadata
// (the ETag above all) from one request. A small object read to be
// replaced conditionally (the lease) then costs one round trip instead of
// a Stat and a Get; the ETag is also that of the very bytes read, where a
// Stat then a Get may straddle a change (which the conditional write then
// refuses, safely but needlessly).
type InfoGetter interface {
	GetInfo(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error)
}

// GetInfo opens key and returns its metadata: in one request where s is an
// InfoGetter, else by a Stat then a Get (whose ETag may then be older than
// the bytes: a conditional write with it fails safely). A missing object is
// ErrNotFound.
func GetInfo(ctx context.Context, s Store, key string) (io.ReadCloser, ObjectInfo, error) {
	if g, ok := s.(InfoGetter); ok {
		return g.GetInfo(ctx, key)
	}
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	rc, err := s.Get(ctx, key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return rc, info, nil
}

// GetInfo passes through to the parent store.
func (s *subStore) GetInfo(ctx context.Context, key string) (io.ReadCloser, ObjectInfo, error) {
	rc, info, err := GetInfo(ctx, s.parent, s.key(key))
	return rc, s.strip(info), err
}
