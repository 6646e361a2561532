package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

func testLogger(t *testing.T) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("SLUICE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func newStore(t testing.TB) replica.Store {
	t.Helper()
	s, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// app is the application: its own connection, in WAL mode, writing rows.
type app struct {
	t    testing.TB
	path string
	conn *sqlite.Conn
	mu   sync.Mutex
	n    int
}

func newApp(t testing.TB, path string) *app {
	t.Helper()
	c, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	must(t, err)
	c.SetBusyTimeout(5 * time.Second)
	a := &app{t: t, path: path, conn: c}
	t.Cleanup(func() { c.Close() })
	a.exec("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
	return a
}

func (a *app) exec(q string, args ...any) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	must(a.t, sqlitex.Execute(a.conn, q, &sqlitex.ExecOptions{Args: args}))
}

// checkpoint runs a blocking checkpoint as an application would. It waits
// for sluice's read transaction, so a short busy timeout keeps it from
// stalling the test; SQLITE_BUSY is an expected outcome.
func (a *app) checkpoint(mode string) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conn.SetBusyTimeout(20 * time.Millisecond)
	defer a.conn.SetBusyTimeout(5 * time.Second)
	err := sqlitex.ExecuteTransient(a.conn, "PRAGMA wal_checkpoint("+mode+")", nil)
	if err != nil && sqlite.ErrCode(err) != sqlite.ResultBusy {
		a.t.Fatalf("wal_checkpoint(%s): %v", mode, err)
	}
}

// insert writes one transaction of k rows of varied size.
func (a *app) insert(k int) {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	end := sqlitex.Transaction(a.conn)
	var err error
	for i := 0; i < k; i++ {
		a.n++
		err = sqlitex.Execute(a.conn, "INSERT INTO t(v) VALUES (?)", &sqlitex.ExecOptions{Args: []any{bytes.Repeat([]byte{byte(a.n)}, 50+(a.n*37)%900)}})
		if err != nil {
			break
		}
	}
	end(&err)
	must(a.t, err)
}

// contentHash hashes every row of t in id order.
func contentHash(t testing.TB, path string) (string, int) {
	t.Helper()
	c, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	must(t, err)
	defer c.Close()
	h := sha256.New()
	n := 0
	must(t, sqlitex.ExecuteTransient(c, "SELECT id, v FROM t ORDER BY id", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
		fmt.Fprintf(h, "%d:%x;", s.ColumnInt64(0), s.ColumnText(1))
		n++
		return nil
	}}))
	var ok string
	must(t, sqlitex.ExecuteTransient(c, "PRAGMA integrity_check", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { ok = s.ColumnText(0); return nil }}))
	if ok != "ok" {
		t.Fatalf("integrity_check of %s: %s", path, ok)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

// rebuild applies the replica's level-0 files in order to a new file (a
// test-only applier), checking the TXID chain and each file's checksum, and
// returns its path and final position (with the rebuilt file's checksum).
func rebuild(t testing.TB, store replica.Store) (string, ltx.Pos) {
	t.Helper()
	ctx := context.Background()
	files, err := replica.ListLTX(ctx, store, 0)
	must(t, err)
	if len(files) == 0 {
		t.Fatal("replica holds no LTX file")
	}
	out := filepath.Join(t.(interface{ TempDir() string }).TempDir(), "rebuilt.db")
	f, err := os.Create(out)
	must(t, err)
	defer f.Close()
	var pos ltx.Pos
	for i, lf := range files {
		if lf.MinTXID != pos.TXID+1 || lf.MaxTXID != lf.MinTXID {
			t.Fatalf("file %d is %s, want TXID %d", i, lf.Key, pos.TXID+1)
		}
		rc, err := store.Get(ctx, lf.Key)
		must(t, err)
		data, err := io.ReadAll(rc)
		rc.Close()
		must(t, err)
		dec := ltx.NewDecoder(bytes.NewReader(data))
		must(t, dec.DecodeHeader())
		hdr := dec.Header()
		if i == 0 && !hdr.IsSnapshot() {
			t.Fatalf("first file %s is not a snapshot", lf.Key)
		}
		if !hdr.NoChecksum() || hdr.PreApplyChecksum != 0 {
			t.Fatalf("%s carries rolling checksums: Litestream 0.5.17 cannot restore it", lf.Key)
		}
		buf := make([]byte, hdr.PageSize)
		for {
			var ph ltx.PageHeader
			if err := dec.DecodePage(&ph, buf); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("decode %s: %v", lf.Key, err)
			}
			_, err := f.WriteAt(buf, int64(ph.Pgno-1)*int64(hdr.PageSize))
			must(t, err)
		}
		if err := dec.Close(); err != nil {
			t.Fatalf("verify %s: %v", lf.Key, err)
		}
		must(t, f.Truncate(int64(hdr.Commit)*int64(hdr.PageSize)))
		got, err := ltx.ChecksumReader(io.NewSectionReader(f, 0, int64(hdr.Commit)*int64(hdr.PageSize)), int(hdr.PageSize))
		must(t, err)
		pos = ltx.Pos{TXID: lf.MaxTXID, PostApplyChecksum: got}
	}
	return out, pos
}

// assertReplicaEquals rebuilds the replica and compares it with the live DB.
func assertReplicaEquals(t testing.TB, store replica.Store, livePath string) ltx.Pos {
	t.Helper()
	out, pos := rebuild(t, store)
	want, wantN := contentHash(t, livePath)
	got, gotN := contentHash(t, out)
	if got != want {
		t.Fatalf("rebuilt replica differs: %d rows (hash %s), live %d rows (hash %s)", gotN, got[:12], wantN, want[:12])
	}
	return pos
}

// countingStore counts every call to the wrapped store.
type countingStore struct {
	replica.Store
	calls atomic.Int64
}

func (s *countingStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	s.calls.Add(1)
	return s.Store.PutIfAbsent(ctx, k, r, n)
}
func (s *countingStore) PutIfMatch(ctx context.Context, k string, r io.Reader, n int64, e string) (replica.ObjectInfo, error) {
	s.calls.Add(1)
	return s.Store.PutIfMatch(ctx, k, r, n, e)
}
func (s *countingStore) Put(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	s.calls.Add(1)
	return s.Store.Put(ctx, k, r, n)
}
func (s *countingStore) Get(ctx context.Context, k string) (io.ReadCloser, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, k)
}
func (s *countingStore) GetRange(ctx context.Context, k string, o, l int64) (io.ReadCloser, error) {
	s.calls.Add(1)
	return s.Store.GetRange(ctx, k, o, l)
}
func (s *countingStore) Stat(ctx context.Context, k string) (replica.ObjectInfo, error) {
	s.calls.Add(1)
	return s.Store.Stat(ctx, k)
}
func (s *countingStore) Delete(ctx context.Context, k ...string) error {
	s.calls.Add(1)
	return s.Store.Delete(ctx, k...)
}
func (s *countingStore) List(ctx context.Context, p string) ([]replica.ObjectInfo, error) {
	s.calls.Add(1)
	return s.Store.List(ctx, p)
}

// failingStore fails the next `fail` conditional creates, recording the keys
// every conditional create was asked for.
type failingStore struct {
	replica.Store
	mu   sync.Mutex
	fail int
	keys []string
}

var errInjected = errors.New("injected upload failure")

func (s *failingStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	fail := s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	if fail {
		return replica.ObjectInfo{}, errInjected
	}
	return s.Store.PutIfAbsent(ctx, k, r, n)
}
