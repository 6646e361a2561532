package timetravel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// history ships TXIDs 1..6 of database "db" to a local-directory replica:
// a table, then one row per transaction, so TXID n holds n-1 rows.
func history(t *testing.T) replica.Store {
	root, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, replica.Sub(root, "db"), t.TempDir())
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)")
	start := historyStart
	h.Ship(start)
	for i := 1; i <= 5; i++ {
		h.Exec("INSERT INTO t (id) VALUES (?)", i)
		h.Ship(start.Add(time.Duration(i) * time.Second))
	}
	return root
}

// historyStart is the time of TXID 1; TXID n is n-1 seconds later.
var historyStart = time.Now().Add(-time.Minute).Truncate(time.Second)

func count(t *testing.T, db dbhost.Database) int64 {
	t.Helper()
	var n int64
	_, err := db.Read(context.Background(), func(c sqlconn.Conn) error {
		res, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "SELECT count(*) FROM t", WantRows: true})
		if err == nil {
			n = res.Rows[0][0].Int
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func stateFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	matches, _ := filepath.Glob(filepath.Join(dir, "db", "*.db"))
	for _, m := range matches {
		out[filepath.Base(m)] = true
	}
	return out
}

// Concurrent requests for one point share one restore; past the entry
// budget the least recently used idle state goes (connections and file),
// a state in use stays, and an evicted state is restored again on its next
// read. Writes fail with SQLITE_READONLY, and what a crash left in the
// directory is gone at start.
func TestCacheSharesBuildsEvictsLRUAndRefusesWrites(t *testing.T) {
	ctx := context.Background()
	root := history(t)
	dir := filepath.Join(t.TempDir(), "past")
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{"3.db", "3.db.tmp-123"} { // a half-built state a crash left
		if err := os.WriteFile(filepath.Join(dir, "db", leftover), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(Options{Dir: dir, Store: root, MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("New left %d entries of an earlier run in %s", len(left), dir)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := c.At(ctx, "db", Point{TXID: 3})
			if err == nil {
				_, err = db.Read(ctx, func(sqlconn.Conn) error { return nil })
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.Builds() != 1 {
		t.Fatalf("10 concurrent requests for TXID 3 restored it %d times, want 1", c.Builds())
	}

	v3, _ := c.At(ctx, "db", Point{TXID: 3})
	if n := count(t, v3); n != 2 {
		t.Fatalf("TXID 3 holds %d rows, want 2", n)
	}
	_, err = v3.Write(ctx, func(cn sqlconn.Conn) error {
		_, err := cn.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t (id) VALUES (99)"})
		return err
	})
	if !errors.Is(err, dberr.ErrReadOnly) {
		t.Fatalf("a write at a past point: %v, want SQLITE_READONLY", err)
	}

	v4, err := c.At(ctx, "db", Point{TXID: 4})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := v4.Session(ctx) // pins TXID 4
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Exec(ctx, sqlconn.Stmt{SQL: "BEGIN"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t (id) VALUES (99)"}); !errors.Is(err, dberr.ErrReadOnly) {
		t.Fatalf("a write in a session at a past point: %v, want SQLITE_READONLY", err)
	}
	v5, err := c.At(ctx, "db", Point{Time: historyStart.Add(4500 * time.Millisecond)}) // after TXID 5's time
	if err != nil {
		t.Fatal(err)
	}
	if v5.(*View).Bookmark() != 5 || count(t, v5) != 4 {
		t.Fatalf("the time after TXID 5's file resolved to %d", v5.(*View).Bookmark())
	}
	// Budget 2: TXID 3 (least recently used, idle) went; 4 (in use) and 5 stay.
	if got := stateFiles(t, dir); got["3.db"] || !got["4.db"] || !got["5.db"] {
		t.Fatalf("states on disk %v, want 4.db and 5.db", got)
	}
	if _, err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, v3); n != 2 || c.Builds() != 4 {
		t.Fatalf("TXID 3 read again after its eviction: %d rows, %d restores; want 2 rows, 4 restores", n, c.Builds())
	}
	if got := stateFiles(t, dir); len(got) != 2 || !got["3.db"] {
		t.Fatalf("states on disk %v, want 2 including 3.db", got)
	}

	if _, err := c.At(ctx, "db", Point{TXID: 9}); !errors.Is(err, dberr.ErrPointUnavailable) {
		t.Fatalf("TXID 9: %v, want POINT_UNAVAILABLE", err)
	}
	if _, err := c.At(ctx, "other", Point{TXID: 1}); !errors.Is(err, dberr.ErrNotFound) {
		t.Fatalf("a database without a replica: %v, want NOT_FOUND", err)
	}
}

func TestParsePoint(t *testing.T) {
	for in, want := range map[string]Point{
		"42":                          {TXID: 42},
		"2026-11-26T10:00:00Z":        {Time: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
		"2026-11-26T11:00:00.5+01:00": {Time: time.Date(2026, 11, 26, 10, 0, 0, 500e6, time.UTC)},
	} {
		got, err := ParsePoint(in)
		if err != nil || got.TXID != want.TXID || !got.Time.Equal(want.Time) {
			t.Errorf("ParsePoint(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "yesterday", "2026-11-26", "-3", "99999999999999999999999"} {
		if _, err := ParsePoint(in); !errors.Is(err, dberr.ErrBadRequest) {
			t.Errorf("ParsePoint(%q): %v, want BAD_REQUEST", in, err)
		}
	}
}

// A TXID already restored, and a time already resolved to a TXID with later
// commits, are served without the bucket: here, after the replica is gone.
func TestCachedPointsSkipTheBucket(t *testing.T) {
	ctx := context.Background()
	root := history(t)
	c, err := New(Options{Dir: filepath.Join(t.TempDir(), "past"), Store: root, Revalidate: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := Point{Time: historyStart.Add(3500 * time.Millisecond)} // after TXID 4's file, before 5's
	v, err := c.At(ctx, "db", at)
	if err != nil || v.(*View).Bookmark() != 4 {
		t.Fatalf("time after TXID 4: %v, %v", v, err)
	}
	if _, err := c.At(ctx, "db", Point{TXID: 2}); err != nil {
		t.Fatal(err)
	}
	sub := replica.Sub(root, "db")
	objs, err := sub.List(ctx, "")
	if err != nil || len(objs) == 0 {
		t.Fatalf("list: %d objects, %v", len(objs), err)
	}
	for _, o := range objs {
		if err := sub.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := c.At(ctx, "db", at); err != nil || count(t, v) != 3 {
		t.Fatalf("the same time again, replica gone: %v", err)
	}
	if v, err := c.At(ctx, "db", Point{TXID: 2}); err != nil || count(t, v) != 1 {
		t.Fatalf("TXID 2 again, replica gone: %v", err)
	}
	if _, err := c.At(ctx, "db", Point{TXID: 3}); !errors.Is(err, dberr.ErrNotFound) {
		t.Fatalf("a TXID never restored, replica gone: %v, want NOT_FOUND", err)
	}
	if c.Builds() != 2 {
		t.Fatalf("%d restores, want 2", c.Builds())
	}
}

// A database purged and created anew under the same name has TXIDs that
// restart at 1: once the revalidation interval passed, a cached state of
// the old history is never served for the new one's TXID.
func TestCachedStateOfAReplacedHistoryIsNotServed(t *testing.T) {
	ctx := context.Background()
	root := history(t) // TXID 3 holds 2 rows
	c, err := New(Options{Dir: filepath.Join(t.TempDir(), "past"), Store: root, Revalidate: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for txid, rows := range map[ltx.TXID]int64{3: 2, 4: 3} {
		v, err := c.At(ctx, "db", Point{TXID: txid})
		if err != nil || count(t, v) != rows {
			t.Fatalf("TXID %d: %v", txid, err)
		}
	}
	sub := replica.Sub(root, "db")
	objs, _ := sub.List(ctx, "")
	for _, o := range objs {
		if err := sub.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	h := restoretest.New(t, sub, t.TempDir()) // the new database: 10 rows per transaction
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)")
	h.Ship(time.Now().Add(-10 * time.Second))
	for i := 1; i <= 3; i++ {
		h.Exec("WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i+1 FROM n WHERE i < ?) INSERT INTO t (id) SELECT i FROM n", i*100, i*100+9)
		h.Ship(time.Now().Add(time.Duration(i-10) * time.Second))
	}
	v, err := c.At(ctx, "db", Point{Time: time.Now().Add(-7500 * time.Millisecond)}) // after the new TXID 3
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, v); v.(*View).Bookmark() != 3 || n != 20 {
		t.Fatalf("a time after TXID 3 of the new history: TXID %d with %d rows as served, want TXID 3 with 20 (2 would be the old history's)", v.(*View).Bookmark(), n)
	}
	if v, err = c.At(ctx, "db", Point{TXID: 4}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, v); n != 30 {
		t.Fatalf("TXID 4 of the new history holds %d rows as served, want 30 (3 would be the old history's)", n)
	}
	if c.Builds() != 4 {
		t.Fatalf("%d restores, want 4", c.Builds())
	}
	c.Forget("db")
	if got := stateFiles(t, filepath.Join(c.opts.Dir)); len(got) != 0 {
		t.Fatalf("Forget left %v", got)
	}
}
