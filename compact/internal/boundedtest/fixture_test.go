package boundedtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	testenv.Cleanup()
	os.Exit(code)
}

// levelZeroFiles is the backlog a burst of writes leaves behind.
const levelZeroFiles = 3000

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// history is a real database's replica: a snapshot, then levelZeroFiles-1
// level-0 files of one insert and one update each, in a file store.
type history struct {
	store *file.Store
	files []replica.LTXFile
	last  ltx.TXID
	hash  string // SHA-256 of the database file after the last TXID
	dir   string
}

var (
	historyOnce sync.Once
	shared      history
)

// buildHistory is built once per test binary and shared (read-only).
func buildHistory(t *testing.T) history {
	historyOnce.Do(func() {
		dir, err := os.MkdirTemp(scratchRoot(), "sluice-bounded-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		fs, err := file.New(filepath.Join(dir, "replica"))
		if err != nil {
			t.Fatal(err)
		}
		h := restoretest.New(t, fs, dir)
		h.SkipHashes = true
		h.Script(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
			WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000)
			INSERT INTO t (v) SELECT printf('row-%d-%s', i, hex(randomblob(40))) FROM n;`)
		files := []replica.LTXFile{h.Ship(t0)}
		for i := 1; i < levelZeroFiles; i++ {
			h.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprintf("new-%d", i))
			h.Exec("UPDATE t SET v = v || 'x' WHERE id = ?", 1+(i*37)%2000)
			files = append(files, h.Ship(t0.Add(time.Duration(i)*time.Second)))
		}
		h.RecordHash()
		shared = history{store: fs, files: files, last: h.Pos().TXID, hash: h.Hashes[h.Pos().TXID], dir: dir}
	})
	if shared.store == nil {
		t.Fatal("building the shared history failed in an earlier test")
	}
	return shared
}

// scratchRoot is tmpfs when the machine has one: the file store fsyncs every
// object, and durability is not what these tests check.
func scratchRoot() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// copyFiles uploads the history's files to dst, 16 at a time.
func copyFiles(t *testing.T, h history, dst replica.Store) {
	t.Helper()
	ctx := context.Background()
	work := make(chan replica.LTXFile)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				rc, err := h.store.Get(ctx, f.Key)
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(rc)
				_ = rc.Close()
				if err == nil {
					_, err = dst.PutIfAbsent(ctx, f.Key, bytes.NewReader(b), int64(len(b)))
				}
				if err != nil {
					errs <- fmt.Errorf("copy %s: %w", f.Key, err)
					return
				}
			}
		}()
	}
	for _, f := range h.files {
		select {
		case work <- f:
		case err := <-errs:
			close(work)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// openCounter counts the object bodies open at once through it (Get and
// GetRange readers not yet closed) and remembers the peak.
type openCounter struct {
	replica.Store
	open, peak, gets atomic.Int64
}

func (s *openCounter) track(rc io.ReadCloser, err error) (io.ReadCloser, error) {
	if err != nil {
		return nil, err
	}
	s.gets.Add(1)
	n := s.open.Add(1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return &countedReader{ReadCloser: rc, s: s}, nil
}

func (s *openCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.track(s.Store.Get(ctx, key))
}

func (s *openCounter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return s.track(s.Store.GetRange(ctx, key, off, n))
}

type countedReader struct {
	io.ReadCloser
	s    *openCounter
	once sync.Once
}

func (r *countedReader) Close() error {
	r.once.Do(func() { r.s.open.Add(-1) })
	return r.ReadCloser.Close()
}
