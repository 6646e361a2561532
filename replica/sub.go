package replica

import (
	"context"
	"io"
	"strings"
)

// Sub returns a view of store rooted at prefix (no leading or trailing
// slash): each database a server hosts replicates to <replica>/<name>/.
// Close does not close the parent store.
func Sub(store Store, prefix string) Store {
	return &subStore{parent: store, prefix: strings.Trim(prefix, "/") + "/"}
}

type subStore struct {
	parent Store
	prefix string
}

func (s *subStore) key(k string) string { return s.prefix + k }

func (s *subStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error) {
	info, err := s.parent.PutIfAbsent(ctx, s.key(key), r, size)
	return s.strip(info), err
}

func (s *subStore) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (ObjectInfo, error) {
	info, err := s.parent.PutIfMatch(ctx, s.key(key), r, size, etag)
	return s.strip(info), err
}

func (s *subStore) Put(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error) {
	info, err := s.parent.Put(ctx, s.key(key), r, size)
	return s.strip(info), err
}

func (s *subStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.parent.Get(ctx, s.key(key))
}

func (s *subStore) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	return s.parent.GetRange(ctx, s.key(key), offset, length)
}

func (s *subStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	info, err := s.parent.Stat(ctx, s.key(key))
	return s.strip(info), err
}

func (s *subStore) Delete(ctx context.Context, keys ...string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = s.key(k)
	}
	return s.parent.Delete(ctx, full...)
}

func (s *subStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	objs, err := s.parent.List(ctx, s.key(prefix))
	for i := range objs {
		objs[i] = s.strip(objs[i])
	}
	return objs, err
}

func (s *subStore) ListAfter(ctx context.Context, prefix, after string) ([]ObjectInfo, error) {
	objs, err := ListAfter(ctx, s.parent, s.key(prefix), s.key(after))
	for i := range objs {
		objs[i] = s.strip(objs[i])
	}
	return objs, err
}

func (s *subStore) strip(info ObjectInfo) ObjectInfo {
	info.Key = strings.TrimPrefix(info.Key, s.prefix)
	return info
}

func (s *subStore) String() string {
	return strings.TrimSuffix(s.parent.String(), "/") + "/" + strings.TrimSuffix(s.prefix, "/")
}

func (s *subStore) Close() error { return nil }
