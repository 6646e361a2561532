// Package file is the local-directory backend of replica.Store: each key is a
// file under a root directory. Conditional creates use a hard link (atomic,
// fails if the name exists); conditional replaces compare a content hash under a
// per-store mutex plus an flock, so two processes sharing a directory are safe.
//
// It imports only the standard library and replica.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/sluicedb/sluice/replica"
)

// tempPrefix starts the name of every file being written; List skips them.
const tempPrefix = ".tmp-"

// lockName is the flock file, at the root, that serialises conditional replaces
// and deletes across processes.
const lockName = ".sluice-store.lock"

// Store is a replica.Store rooted at a local directory.
type Store struct {
	root string
	mu   sync.Mutex // serialises goroutines; flock on lockName serialises processes
}

var _ replica.Store = (*Store)(nil)

// New returns a store rooted at dir (made absolute). The directory is created
// on the first write.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("file store: empty directory path")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file store: resolve %q: %w", dir, err)
	}
	return &Store{root: abs}, nil
}

// Root returns the absolute root directory.
func (s *Store) Root() string { return s.root }

// String returns the store's file:// URL.
func (s *Store) String() string { return "file://" + filepath.ToSlash(s.root) }

// Close releases nothing: the store holds no open files between calls.
func (s *Store) Close() error { return nil }

// pathOf maps a key to its file path, rejecting keys that could escape the root.
func (s *Store) pathOf(key string) (string, error) {
	if key == "" || key == lockName || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return "", fmt.Errorf("invalid key %q in %s: keys are non-empty, relative, '/'-separated", key, s)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." || strings.HasPrefix(part, tempPrefix) {
			return "", fmt.Errorf("invalid key %q in %s: empty, '.', '..' or %q-prefixed path element", key, s, tempPrefix)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// PutIfAbsent writes key only if it does not exist: the data goes to a temp file
// that is then hard-linked to the final name, which fails atomically if taken.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	p, err := s.pathOf(key)
	if err != nil {
		return replica.ObjectInfo{}, err
	}
	tmp, info, err := s.writeTemp(ctx, p, r, size)
	if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: %w", key, s, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); errors.Is(err, fs.ErrExist) {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: %w", key, s, replica.ErrExists)
	} else if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: link: %w", key, s, err)
	}
	if err := os.Remove(tmp); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: remove temp file: %w", key, s, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: %w", key, s, err)
	}
	info.Key = key
	return info, nil
}

// PutIfMatch replaces key only if its content hash equals etag.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	return s.replace(ctx, key, r, size, func(p string) error {
		current, err := hashFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return replica.ErrNotFound
		} else if err != nil {
			return err
		}
		if current != etag {
			return replica.ErrPreconditionFailed
		}
		return nil
	})
}

// Put writes key unconditionally (temp file, then rename).
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.replace(ctx, key, r, size, func(string) error { return nil })
}

// replace writes a temp file, then under the lock runs check and renames the
// temp file over key.
func (s *Store) replace(ctx context.Context, key string, r io.Reader, size int64, check func(path string) error) (replica.ObjectInfo, error) {
	p, err := s.pathOf(key)
	if err != nil {
		return replica.ObjectInfo{}, err
	}
	tmp, info, err := s.writeTemp(ctx, p, r, size)
	if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: %w", key, s, err)
	}
	defer os.Remove(tmp)
	err = s.locked(func() error {
		if err := check(p); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	})
	if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: %w", key, s, err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("put %s in %s: %w", key, s, err)
	}
	info.Key = key
	return info, nil
}

// writeTemp copies r into a fsynced temp file beside final and returns its
// path and metadata (size, content-hash ETag).
func (s *Store) writeTemp(ctx context.Context, final string, r io.Reader, size int64) (string, replica.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return "", replica.ObjectInfo{}, err
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", replica.ObjectInfo{}, fmt.Errorf("create directory: %w", classify(err))
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return "", replica.ObjectInfo{}, fmt.Errorf("create temp file: %w", classify(err))
	}
	fail := func(err error) (string, replica.ObjectInfo, error) {
		f.Close()
		os.Remove(f.Name())
		return "", replica.ObjectInfo{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err != nil {
		return fail(fmt.Errorf("write temp file: %w", err))
	}
	if size >= 0 && n != size {
		return fail(fmt.Errorf("body is %d bytes, caller declared %d", n, size))
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("fsync temp file: %w", err))
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", replica.ObjectInfo{}, fmt.Errorf("close temp file: %w", err)
	}
	return f.Name(), replica.ObjectInfo{Size: n, ModTime: fi.ModTime(), ETag: hashString(h)}, nil
}

// locked runs fn holding the store mutex and an exclusive flock on the root's
// lock file (creating the root if needed).
func (s *Store) locked(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return fmt.Errorf("create root directory: %w", classify(err))
	}
	lf, err := os.OpenFile(filepath.Join(s.root, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open lock file: %w", classify(err))
	}
	defer lf.Close() // closing the descriptor releases the flock
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("flock %s: %w", lf.Name(), err)
	}
	return fn()
}

// Get opens the whole object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange opens length bytes from offset (length < 0: to the end).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s from %s: %w", key, s, err)
	}
	p, err := s.pathOf(key)
	if err != nil {
		return nil, err
	}
	f, err := openRegular(p)
	if err != nil {
		return nil, fmt.Errorf("get %s from %s: %w", key, s, err)
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, fmt.Errorf("get %s from %s: seek to %d: %w", key, s, offset, err)
		}
	}
	if length < 0 {
		return f, nil
	}
	return limitedFile{io.LimitReader(f, length), f}, nil
}

// Stat returns the object's size, modification time and content-hash ETag.
func (s *Store) Stat(ctx context.Context, key string) (replica.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, err)
	}
	p, err := s.pathOf(key)
	if err != nil {
		return replica.ObjectInfo{}, err
	}
	f, err := openRegular(p)
	if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: %w", key, s, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return replica.ObjectInfo{}, fmt.Errorf("stat %s in %s: hash: %w", key, s, err)
	}
	return replica.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime(), ETag: hashString(h)}, nil
}

// Delete removes the files; missing ones are not an error.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete from %s: %w", s, err)
	}
	paths := make([]string, len(keys))
	for i, k := range keys {
		p, err := s.pathOf(k)
		if err != nil {
			return err
		}
		paths[i] = p
	}
	if _, err := os.Stat(s.root); errors.Is(err, fs.ErrNotExist) {
		return nil // nothing was ever written
	}
	return s.locked(func() error {
		for i, p := range paths {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete %s from %s: %w", keys[i], s, err)
			}
		}
		return nil
	})
}

// List walks the directory holding prefix and returns the files whose keys
// start with prefix, sorted by key. The ETag is left empty (hashing every file
// would read the whole replica); Stat returns it.
func (s *Store) List(ctx context.Context, prefix string) ([]replica.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", prefix, s, err)
	}
	// Start at the deepest directory the prefix names fully.
	dir := ""
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dir = path.Clean(prefix[:i])
		if strings.HasPrefix(dir, "..") || strings.HasPrefix(dir, "/") {
			return nil, fmt.Errorf("invalid list prefix %q in %s", prefix, s)
		}
	}
	start := filepath.Join(s.root, filepath.FromSlash(dir))
	var out []replica.ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a directory that vanished, or a prefix never written
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, tempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if key == lockName {
			return nil
		}
		if d.IsDir() {
			// Skip directories that cannot hold a matching key.
			if key != "." && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while walking
		} else if err != nil {
			return err
		}
		out = append(out, replica.ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", prefix, s, classify(err))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// openRegular opens a regular file; a missing file or a directory is ErrNotFound.
func openRegular(p string) (*os.File, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, replica.ErrNotFound
	} else if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, replica.ErrNotFound
	}
	return f, nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hashString(h), nil
}

func hashString(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// syncDir fsyncs a directory so a new or renamed entry survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// ctxReader fails reads once ctx is done, so a cancelled upload stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type limitedFile struct {
	io.Reader
	io.Closer
}
