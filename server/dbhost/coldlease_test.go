package dbhost

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// leaseGate holds every access to a lease object until open is closed: a
// store whose lease round trips are slow, as a far bucket's are.
type leaseGate struct {
	replica.Store
	open chan struct{}
}

func (g leaseGate) wait(ctx context.Context, key string) error {
	if !strings.HasSuffix(key, lease.Key) {
		return nil
	}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g leaseGate) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := g.wait(ctx, key); err != nil {
		return nil, err
	}
	return g.Store.Get(ctx, key)
}

func (g leaseGate) Stat(ctx context.Context, key string) (replica.ObjectInfo, error) {
	if err := g.wait(ctx, key); err != nil {
		return replica.ObjectInfo{}, err
	}
	return g.Store.Stat(ctx, key)
}

func (g leaseGate) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if err := g.wait(ctx, key); err != nil {
		return replica.ObjectInfo{}, err
	}
	return g.Store.PutIfAbsent(ctx, key, r, size)
}

func (g leaseGate) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (replica.ObjectInfo, error) {
	if err := g.wait(ctx, key); err != nil {
		return replica.ObjectInfo{}, err
	}
	return g.Store.PutIfMatch(ctx, key, r, size, etag)
}

func readCount(ctx context.Context, db Database) (int64, Bookmark, error) {
	var n int64
	bm, err := db.Read(ctx, func(c sqlconn.Conn) error {
		res, err := c.Exec(ctx, sqlconn.Stmt{SQL: "SELECT count(*) FROM t", WantRows: true})
		if err == nil {
			n = res.Rows[0][0].Int
		}
		return err
	})
	return n, bm, err
}

func coldLeasedHost(t *testing.T, store replica.Store, id string) *Host {
	return newHost(t, store, t.TempDir(), func(o *Options) {
		o.Lease = &lease.Options{Holder: id, URL: "http://" + id, TTL: time.Second, Poll: 50 * time.Millisecond}
		o.ColdOpen = &coldopen.Options{}
		o.StatementTimeout = time.Minute
	})
}

// A cold open answers its first read while the lease cannot be taken yet;
// the previous writer then acknowledges one more row and hands over. A
// read carrying that row's bookmark is not answered from the older view:
// it waits for the lease, and then sees the row. Writes are acknowledged
// once the lease is held, and the bucket holds every acknowledged row.
func TestColdOpenAnswersBeforeTheLeaseAndKeepsReadYourWrites(t *testing.T) {
	root := newMinIOStore(t)
	ctx := context.Background()
	a := leasedHost(t, root, "a")
	dbA, err := a.Create(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dbA, "CREATE TABLE t (id INTEGER PRIMARY KEY, pad BLOB)")
	write(t, dbA, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000) INSERT INTO t SELECT i, randomblob(300) FROM n")

	gate := leaseGate{Store: root, open: make(chan struct{})}
	b := coldLeasedHost(t, gate, "b")
	dbB, err := b.Get(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	cold, ok := dbB.(*coldDB)
	if !ok {
		t.Fatalf("Get of a database only in the bucket returned %T, want a cold open", dbB)
	}
	if n, _, err := readCount(ctx, dbB); err != nil || n != 3000 {
		t.Fatalf("first read while the lease is held up: %d rows, %v; want 3000 at once", n, err)
	}
	viewTXID := cold.Bookmark()

	// The writer acknowledges one more row, then stops (its lease is released).
	acked := write(t, dbA, "INSERT INTO t (id) VALUES (3001)")
	if acked <= viewTXID {
		t.Fatalf("the writer's bookmark %d is not past the view's %d: the test proves nothing", acked, viewTXID)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		n   int64
		bm  Bookmark
		err error
	}
	ryw := make(chan answer, 1)
	go func() {
		n, bm, err := readCount(WithReadAfter(ctx, acked), dbB)
		ryw <- answer{n, bm, err}
	}()
	select {
	case got := <-ryw:
		t.Fatalf("a read with bookmark %d was answered (%d rows at %d, %v) from the view at %d", acked, got.n, got.bm, got.err, viewTXID)
	case <-time.After(300 * time.Millisecond):
	}
	// Without a bookmark a read is still answered at once, from the view.
	if n, bm, err := readCount(ctx, dbB); err != nil || n != 3000 || bm != viewTXID {
		t.Fatalf("read without bookmark: %d rows at %d, %v; want 3000 at %d", n, bm, err, viewTXID)
	}

	close(gate.open)
	select {
	case got := <-ryw:
		if got.err != nil || got.n != 3001 || got.bm < acked {
			t.Fatalf("read with bookmark %d: %d rows at %d, %v; want 3001 at >= %d", acked, got.n, got.bm, got.err, acked)
		}
		t.Logf("read with bookmark %d answered after the lease: %d rows at TXID %d", acked, got.n, got.bm)
	case <-time.After(30 * time.Second):
		t.Fatal("the read with a bookmark was not answered 30 s after the lease could be taken")
	}
	write(t, dbB, "INSERT INTO t (id) VALUES (3002)")
	if n := queryInt(t, dbB, "SELECT count(*) FROM t"); n != 3002 {
		t.Fatalf("after the write on b: %d rows, want 3002", n)
	}
	if n := restoredCount(t, root, "app", "SELECT count(*) FROM t"); n != 3002 {
		t.Fatalf("restored from the bucket: %d rows, want the 3002 acknowledged", n)
	}
}

// While another instance writes the database, a cold open learns it from
// the lease it asked for beside the plan: AwaitWriter (what the forwarder
// asks before routing a request here) names the writer, a write through the
// cold open is refused as needing it, and nothing is written here.
func TestColdOpenWithTheLeaseHeldElsewhere(t *testing.T) {
	root := newMinIOStore(t)
	ctx := context.Background()
	a := leasedHost(t, root, "a")
	dbA, err := a.Create(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dbA, "CREATE TABLE t (id INTEGER PRIMARY KEY, pad BLOB)")
	write(t, dbA, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) INSERT INTO t SELECT i, randomblob(300) FROM n")

	b := coldLeasedHost(t, root, "b")
	dbB, err := b.Get(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dbB.(*coldDB); !ok {
		t.Fatalf("Get returned %T, want a cold open", dbB)
	}
	var nl *NotLeaderError
	if err := AwaitWriter(ctx, dbB); !errors.As(err, &nl) || nl.Leader.URL != "http://a" {
		t.Fatalf("AwaitWriter on the cold open while a writes: %v, want NotLeaderError naming http://a", err)
	}
	_, err = dbB.Write(ctx, func(c sqlconn.Conn) error {
		_, err := c.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t (id) VALUES (9999)"})
		return err
	})
	if !errors.As(err, &nl) || nl.Leader.URL != "http://a" {
		t.Fatalf("write through the cold open while a writes: %v, want NotLeaderError naming http://a", err)
	}
	if _, err := b.Get(ctx, "app"); !errors.As(err, &nl) {
		t.Fatalf("b.Get after the cold open ended = %v, want NotLeaderError", err)
	}
	write(t, dbA, "INSERT INTO t (id) VALUES (2001)")
	if n := restoredCount(t, root, "app", "SELECT count(*) FROM t"); n != 2001 {
		t.Fatalf("restored: %d rows, want 2001 (only a's writes)", n)
	}
}
