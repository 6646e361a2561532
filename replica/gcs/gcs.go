// Package gcs is the Google Cloud Storage backend of replica.Store, built on
// cloud.google.com/go/storage. Conditional creates use the DoesNotExist
// precondition (ifGenerationMatch=0); the ETag is the object's generation, and
// conditional replaces use GenerationMatch.
//
// It imports replica and the GCS client; nothing else in sluice.
package gcs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/sluicedb/sluice/replica"
)

// Config locates a bucket prefix. Credentials come from Application Default
// Credentials unless an emulator is used.
type Config struct {
	Bucket string
	Prefix string // without leading or trailing '/'
	// Endpoint is an emulator's base URL (e.g. http://127.0.0.1:4443), used
	// without authentication. STORAGE_EMULATOR_HOST has the same effect.
	Endpoint string
}

// ParseURL parses gs://bucket/prefix?endpoint=….
func ParseURL(u *url.URL) (Config, error) {
	if u.Scheme != "gs" && u.Scheme != "gcs" {
		return Config{}, fmt.Errorf("gcs store: URL %q: scheme must be gs", u.Redacted())
	}
	c := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: u.Query().Get("endpoint")}
	if c.Bucket == "" {
		return Config{}, fmt.Errorf("gcs store: URL %q has no bucket: use gs://BUCKET/PREFIX", u.Redacted())
	}
	return c, nil
}

// Store is a replica.Store on one GCS bucket prefix.
type Store struct {
	cfg    Config
	client *storage.Client
	bucket *storage.BucketHandle
}

var _ replica.Store = (*Store)(nil)

// OpenURL parses a gs:// URL and opens the store.
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	cfg, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg)
}

// New opens a store. It makes no request.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("gcs store: no bucket given")
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		opts = append(opts,
			option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/storage/v1/"),
			option.WithoutAuthentication(),
			storage.WithJSONReads())
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcs store: create client for bucket %s (check credentials or STORAGE_EMULATOR_HOST=%q): %w", cfg.Bucket, os.Getenv("STORAGE_EMULATOR_HOST"), err)
	}
	return &Store{cfg: cfg, client: client, bucket: client.Bucket(cfg.Bucket)}, nil
}

// String returns the store's URL.
func (s *Store) String() string {
	u := "gs://" + s.cfg.Bucket + "/" + s.cfg.Prefix
	if s.cfg.Endpoint != "" {
		u += "?endpoint=" + s.cfg.Endpoint
	}
	return u
}

// Close closes the client.
func (s *Store) Close() error { return s.client.Close() }

func (s *Store) objectName(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

// putTokenKey is custom metadata holding a random token per call, so that a
// 412 answered to the library's retry of our own successful upload is
// recognised as ours.
const putTokenKey = "sluice-put-token"

// PutIfAbsent uploads key with the DoesNotExist precondition.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.put(ctx, "put-if-absent", key, r, size, storage.Conditions{DoesNotExist: true})
}

// PutIfMatch uploads key if its generation equals etag.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	gen, err := strconv.ParseInt(etag, 10, 64)
	if err != nil || gen <= 0 {
		return replica.ObjectInfo{}, fmt.Errorf("put-if-match %s in %s: ETag %q is not a GCS generation: %w", key, s, etag, replica.ErrPreconditionFailed)
	}
	return s.put(ctx, "put-if-match", key, r, size, storage.Conditions{GenerationMatch: gen})
}

// Put uploads key unconditionally.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.put(ctx, "put", key, r, size, storage.Conditions{})
}

// chunkQuantum is the granularity GCS requires of resumable-upload chunks.
const chunkQuantum = 256 << 10

func (s *Store) put(ctx context.Context, op, key string, r io.Reader, size int64, cond storage.Conditions) (replica.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, classify(err))
	}
	obj := s.bucket.Object(s.objectName(key))
	if cond != (storage.Conditions{}) {
		obj = obj.If(cond)
	}
	// A cancelled write must not commit: the writer uploads until Close, and
	// cancelling its context aborts it.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	token := newToken()
	w.Metadata = map[string]string{putTokenKey: token}
	if size >= 0 {
		// Buffer no more than the object (the default is 16 MiB per writer):
		// one request, still retried by the library.
		w.ChunkSize = int(min((size/chunkQuantum+1)*chunkQuantum, 16<<20))
	}
	n, err := io.Copy(w, r)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("body is %d bytes, caller declared %d", n, size)
	}
	if err != nil {
		cancel()
		w.Close()
		return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, classify(err))
	}
	if err := w.Close(); err != nil {
		switch status := httpStatus(err); {
		case status == http.StatusPreconditionFailed:
			if info, ok := s.ownedBy(ctx, key, token); ok {
				return info, nil
			}
			if cond.DoesNotExist {
				return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrExists)
			}
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrPreconditionFailed)
		case status == http.StatusNotFound && cond.GenerationMatch != 0:
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, replica.ErrNotFound)
		default:
			return replica.ObjectInfo{}, fmt.Errorf("%s %s in %s: %w", op, key, s, classify(err))
		}
	}
	return info(key, w.Attrs()), nil
}

func (s *Store) ownedBy(ctx context.Context, key, token string) (replica.ObjectInfo, bool) {
	attrs, err := s.bucket.Object(s.objectName(key)).Attrs(ctx)
	if err != nil || attrs.Metadata[putTokenKey] != token {
		return replica.ObjectInfo{}, false
	}
	return info(key, attrs), true
}

func info(key string, a *storage.ObjectAttrs) replica.ObjectInfo {
	return replica.ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated, ETag: strconv.FormatInt(a.Generation, 10)}
}

// Get opens the whole object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange opens length bytes from offset (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	rc, err := s.bucket.Object(s.objectName(key)).NewRangeReader(ctx, offset, length)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, fmt.Errorf("get %s from %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("get %s from %s (offset %d, length %d): %w", key, s, offset, length, classify(err))
	}
	return rc, nil
}

// Stat returns the object's attributes.
func (s *Store) Stat(ctx context.Context, key string) (replica.ObjectInfo, error) {
	attrs, err := s.bucket.Object(s.objectName(key)).Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, replica.ErrNotFound)
	} else if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, classify(err))
	}
	return info(key, attrs), nil
}

// deleteParallelism bounds concurrent single-object deletes (GCS has no
// batch delete in this client).
const deleteParallelism = 16

// Delete removes keys, ignoring missing ones.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete from %s: %w", s, classify(err))
	}
	sem := make(chan struct{}, deleteParallelism)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := s.bucket.Object(s.objectName(k)).Delete(ctx)
			if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("delete %s from %s: %w", k, s, classify(err))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// List iterates the objects under prefix.
func (s *Store) List(ctx context.Context, prefix string) ([]replica.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", prefix, s, classify(err))
	}
	full := s.objectName(prefix)
	if s.cfg.Prefix != "" && prefix == "" {
		full = s.cfg.Prefix + "/"
	}
	q := &storage.Query{Prefix: full}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated", "Generation"}); err != nil {
		return nil, err
	}
	it := s.bucket.Objects(ctx, q)
	var out []replica.ObjectInfo
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("list %q in %s: %w", prefix, s, classify(err))
		}
		key := a.Name
		if s.cfg.Prefix != "" {
			key = strings.TrimPrefix(key, s.cfg.Prefix+"/")
		}
		out = append(out, info(key, a))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func httpStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
