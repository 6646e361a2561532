package groupcommit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
	"zombiezen.com/go/sqlite"
)

func testLogger(t testing.TB) *slog.Logger { return testenv.Logger(t, slog.LevelWarn) }

func newFileStore(t testing.TB) replica.Store {
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testDB is one database and its write path, set up as a server sets one
// up: a replicated.DB, the shared writer connection, and a reader.
type testDB struct {
	*Committer
	rep    *replicated.DB
	reader *sqlconn.Handle
	path   string
}

// openDB opens a database in a fresh directory that replicates to store,
// restoring store's replica first if it has one; mod adjusts the options.
func openDB(t testing.TB, store replica.Store, mod func(*Options)) *testDB {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.db")
	res, err := restore.Restore(ctx, store, path, restore.Options{Logger: testLogger(t)})
	switch {
	case errors.Is(err, restore.ErrNoReplica):
		c, err := sqlconn.Open(path, sqlconn.OwnWriter, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Run("PRAGMA user_version=0")
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatal(err)
	default:
		if err := engine.RecordPosition(path, store.String(), res.Pos); err != nil {
			t.Fatal(err)
		}
	}
	opts := Options{Name: "db", ReplicaName: store.String(), Logger: testLogger(t), ExternalPoll: time.Second}
	if mod != nil {
		mod(&opts)
	}
	rep, err := replicated.Open(ctx, path, replicated.Options{Name: "db", Logger: testLogger(t), Store: store,
		RequireMatch: opts.Durability == Sync})
	if err != nil {
		t.Fatal(err)
	}
	w, err := sqlconn.Open(path, sqlconn.SharedWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sqlconn.Open(path, sqlconn.SharedReader, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	opts.Writer, opts.Replica = w, rep
	db := &testDB{Committer: New(opts), rep: rep, reader: r, path: path}
	t.Cleanup(func() {
		db.Close()
		rep.Close(context.Background(), false)
		w.Close()
		r.Close()
	})
	return db
}

// write runs sql as one write and returns its position.
func write(t testing.TB, db *testDB, sql string, args ...sqlconn.Value) ltx.TXID {
	t.Helper()
	txid, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: sql, Args: args})
		return err
	})
	if err != nil {
		t.Fatalf("write %s: %v", sql, err)
	}
	return txid
}

// queryInt reads one integer from the local file.
func queryInt(t testing.TB, db *testDB, sql string) int64 {
	t.Helper()
	res, err := db.reader.Exec(context.Background(), sqlconn.Stmt{SQL: sql, WantRows: true})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res.Rows[0][0].Int
}

// queryString reads one text value from the local file.
func queryString(t testing.TB, db *testDB, sql string) string {
	t.Helper()
	res, err := db.reader.Exec(context.Background(), sqlconn.Stmt{SQL: sql, WantRows: true})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res.Rows[0][0].Text
}

// restoredCount restores store's replica into a fresh file and runs query,
// which returns one integer.
func restoredCount(t testing.TB, store replica.Store, query string) int64 {
	t.Helper()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), store, out, restore.Options{}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	c, err := sqlite.OpenConn(out, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _, err := c.PrepareTransient(query)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Finalize()
	if row, err := st.Step(); err != nil || !row {
		t.Fatalf("%s on restored db: %v", query, err)
	}
	return st.ColumnInt64(0)
}

// groupRecorder records the size of every committed group.
type groupRecorder struct {
	mu    sync.Mutex
	sizes []int
}

func (g *groupRecorder) GroupCommitted(db string, n int, d time.Duration) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	g.mu.Unlock()
}
func (g *groupRecorder) Synced(string, time.Duration, error) {}

// flakyStore fails uploads while failing is set.
type flakyStore struct {
	replica.Store
	failing atomic.Bool
}

func (s *flakyStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if s.failing.Load() {
		return replica.ObjectInfo{}, errors.New("injected upload failure")
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}
