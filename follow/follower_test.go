package follow

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

// leader is a real application database shipped by the real engine: every
// ship() is one LTX file in the store.
type leader struct {
	t     *testing.T
	conn  *sqlite.Conn
	db    *engine.DB
	store replica.Store
	path  string
	n     int64
}

func newLeader(t *testing.T) *leader {
	t.Helper()
	store, err := file.New(filepath.Join(t.TempDir(), "replica"))
	must(t, err)
	path := filepath.Join(t.TempDir(), "leader.db")
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite|sqlite.OpenCreate|sqlite.OpenWAL)
	must(t, err)
	conn.SetBusyTimeout(5 * time.Second)
	l := &leader{t: t, conn: conn, store: store, path: path}
	// tot mirrors t in the same transaction: a reader that sees them disagree saw a torn state.
	l.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER, pad BLOB)")
	l.exec("CREATE TABLE tot(n INTEGER, s INTEGER)")
	l.exec("INSERT INTO tot VALUES (0, 0)")
	l.db, err = engine.Open(context.Background(), path, store, engine.Options{Logger: quiet()})
	must(t, err)
	t.Cleanup(func() {
		l.db.Close(context.Background())
		conn.Close()
	})
	return l
}

func (l *leader) exec(q string, args ...any) {
	l.t.Helper()
	must(l.t, sqlitex.Execute(l.conn, q, &sqlitex.ExecOptions{Args: args}))
}

// insert adds k rows (of varied size, so pages split and the file grows)
// and their totals in one transaction.
func (l *leader) insert(k int) {
	l.t.Helper()
	var err error
	end := sqlitex.Transaction(l.conn)
	for i := 0; i < k && err == nil; i++ {
		l.n++
		pad := make([]byte, 100+(l.n*97)%1500)
		err = sqlitex.Execute(l.conn, "INSERT INTO t(x, pad) VALUES (?, ?)", &sqlitex.ExecOptions{Args: []any{l.n, pad}})
		if err == nil {
			err = sqlitex.Execute(l.conn, "UPDATE tot SET n = n + 1, s = s + ?", &sqlitex.ExecOptions{Args: []any{l.n}})
		}
	}
	end(&err)
	must(l.t, err)
}

// deleteHalf deletes every other row and fixes the totals in one transaction.
func (l *leader) deleteHalf() {
	l.t.Helper()
	var err error
	end := sqlitex.Transaction(l.conn)
	err = sqlitex.Execute(l.conn, "DELETE FROM t WHERE id % 2 = 0", nil)
	if err == nil {
		err = sqlitex.Execute(l.conn, "UPDATE tot SET n = (SELECT count(*) FROM t), s = (SELECT coalesce(sum(x), 0) FROM t)", nil)
	}
	end(&err)
	must(l.t, err)
}

func (l *leader) ship() replica.LTXFile {
	l.t.Helper()
	_, err := l.db.Sync(context.Background())
	must(l.t, err)
	return replica.LTXFile{Level: 0, MinTXID: l.db.Pos().TXID, MaxTXID: l.db.Pos().TXID, Key: replica.LTXKey(0, l.db.Pos().TXID, l.db.Pos().TXID)}
}

func TestReadersNeverSeeATornStateWhileHundredsOfFilesApply(t *testing.T) {
	l := newLeader(t)
	l.insert(10)
	l.ship()

	path := filepath.Join(t.TempDir(), "follower.db")
	f, err := Open(context.Background(), path, l.store, Options{PollInterval: 2 * time.Millisecond, Logger: quiet()})
	must(t, err)
	if f.Pos().TXID != l.db.Pos().TXID {
		t.Fatalf("after Open the follower is at TXID %d, the leader shipped %d", f.Pos().TXID, l.db.Pos().TXID)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.Run(ctx) }()

	// Readers on their own connections, as the server's read pool would be.
	var reads, checks atomic.Int64
	readerErr := make(chan error, 3)
	var lastSeen [3]int64
	var final atomic.Bool // set once the final state is applied
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readerErr <- readLoop(ctx, path, &reads, &checks, &final, &lastSeen[r])
		}()
	}

	const files = 300
	for i := 0; i < files; i++ {
		switch {
		case i == 150:
			l.deleteHalf()
		case i == 151:
			l.exec("VACUUM") // the database shrinks: the follower must truncate
		case i%50 == 7:
			l.exec("CREATE TABLE IF NOT EXISTS extra" + fmt.Sprint(i) + "(a)") // schema change
		default:
			l.insert(1 + i%7)
		}
		l.ship()
	}
	// The last transaction changes neither page 1 nor the file size, so
	// only the bumped change counter tells readers to drop cached pages.
	must(t, sqlitex.ExecuteScript(l.conn, "UPDATE t SET x = x + 1 WHERE id = (SELECT max(id) FROM t); UPDATE tot SET s = s + 1;", nil))
	l.ship()
	finalTXID := l.db.Pos().TXID
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	must(t, f.WaitFor(wctx, finalTXID))
	wcancel()
	final.Store(true) // each reader does at least one more read, then stops
	cancel()
	wg.Wait()
	close(readerErr)
	for err := range readerErr {
		if err != nil {
			t.Fatal(err)
		}
	}
	var wantSum int64
	must(t, sqlitex.Execute(l.conn, "SELECT sum(x) FROM t", &sqlitex.ExecOptions{
		ResultFunc: func(st *sqlite.Stmt) error { wantSum = st.ColumnInt64(0); return nil }}))
	for r, s := range lastSeen {
		if s != wantSum {
			t.Fatalf("reader %d still saw sum %d after the follower applied the final state (sum %d): a stale page cache", r, s, wantSum)
		}
	}
	if reads.Load() < 100 || checks.Load() < 5 {
		t.Fatalf("readers ran only %d reads and %d integrity checks: the test proved little", reads.Load(), checks.Load())
	}
	st := f.Stats()
	if st.Applied < files-5 || st.Restores != 1 {
		t.Fatalf("stats %+v: expected about %d files applied by name and only the initial restore", st, files)
	}
	must(t, f.Close())
	if got, want := contentHash(t, path), contentHash(t, l.path); got != want {
		t.Fatalf("follower content %s differs from the leader's %s", got, want)
	}
	t.Logf("%d reads, %d integrity checks, %d files applied", reads.Load(), checks.Load(), st.Applied)
}

// readLoop reads in read transactions until ctx ends; any error, torn
// state (t disagreeing with tot), going backwards, or integrity failure is
// returned.
// Once final is set, the sum of the first read that started after it is
// stored in lastSum and the loop stops when ctx ends.
func readLoop(ctx context.Context, path string, reads, checks *atomic.Int64, final *atomic.Bool, lastSum *int64) error {
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetBusyTimeout(10 * time.Second)
	var lastOdd int64 = -1
	afterFinal := false
	for i := 0; ctx.Err() == nil || !afterFinal; i++ {
		startedAfterFinal := final.Load()
		var n, odd, s, totN, totS int64
		err := func() (err error) {
			end := sqlitex.Transaction(conn)
			defer end(&err)
			// Rows with odd ids are never deleted (deleteHalf removes the even
			// ones), so their count only grows, however far apart reads are.
			if err = sqlitex.Execute(conn, "SELECT count(*), count(*) FILTER (WHERE id % 2 = 1), coalesce(sum(x), 0) FROM t", &sqlitex.ExecOptions{
				ResultFunc: func(st *sqlite.Stmt) error {
					n, odd, s = st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnInt64(2)
					return nil
				}}); err != nil {
				return err
			}
			return sqlitex.Execute(conn, "SELECT n, s FROM tot", &sqlitex.ExecOptions{
				ResultFunc: func(st *sqlite.Stmt) error { totN, totS = st.ColumnInt64(0), st.ColumnInt64(1); return nil }})
		}()
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		if n != totN || s != totS {
			return fmt.Errorf("read %d saw a torn state: t has %d rows summing to %d, tot says %d rows summing to %d", i, n, s, totN, totS)
		}
		if odd < lastOdd {
			return fmt.Errorf("read %d went backwards: %d odd-id rows after %d", i, odd, lastOdd)
		}
		lastOdd = odd
		if startedAfterFinal && !afterFinal {
			*lastSum, afterFinal = s, true
		}
		reads.Add(1)
		if i%20 == 0 {
			var res string
			if err := sqlitex.Execute(conn, "PRAGMA integrity_check", &sqlitex.ExecOptions{
				ResultFunc: func(st *sqlite.Stmt) error { res += st.ColumnText(0); return nil }}); err != nil {
				return fmt.Errorf("integrity_check %d: %w", i, err)
			}
			if res != "ok" {
				return fmt.Errorf("integrity_check %d: %s", i, res)
			}
			checks.Add(1)
		}
	}
	return nil
}

func TestRestoresAgainWhenTheNextFileWasCompactedAway(t *testing.T) {
	l := newLeader(t)
	l.insert(5)
	first := l.ship()
	path := filepath.Join(t.TempDir(), "follower.db")
	f, err := Open(context.Background(), path, l.store, Options{CheckInterval: time.Millisecond, Logger: quiet()})
	must(t, err)
	defer f.Close()

	// A reader connection stays open across the re-restore, as server readers would.
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	must(t, err)
	defer conn.Close()
	conn.SetBusyTimeout(5 * time.Second)
	if n := countRows(t, conn); n != 5 {
		t.Fatalf("follower has %d rows after Open, want 5", n)
	}

	c := compact.New(l.store, compact.Config{}, quiet())
	c.Notify(first)
	var shipped []replica.LTXFile
	for i := 0; i < 10; i++ {
		l.insert(3)
		shipped = append(shipped, l.ship())
		c.Notify(shipped[len(shipped)-1])
	}
	must(t, c.Flush(context.Background(), time.Now(), 0))
	for _, s := range shipped {
		must(t, l.store.Delete(context.Background(), s.Key)) // as level-0 retention would
	}

	// The first poll finds the next file gone; a poll CheckInterval later restores.
	for i := 0; i < 100 && f.Pos().TXID != l.db.Pos().TXID; i++ {
		if _, err := f.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got, want := f.Pos().TXID, l.db.Pos().TXID; got != want {
		t.Fatalf("after the slow path the follower is at TXID %d, want %d", got, want)
	}
	if st := f.Stats(); st.Restores != 2 {
		t.Fatalf("stats %+v: want exactly one re-restore", st)
	}
	if n := countRows(t, conn); n != 35 {
		t.Fatalf("the open reader sees %d rows after the re-restore, want 35", n)
	}

	// Following by name resumes after the re-restore.
	l.insert(1)
	l.ship()
	if n, err := f.Poll(context.Background()); err != nil || n != 1 {
		t.Fatalf("poll after re-restore: %d applied, err %v; want 1", n, err)
	}
	if n := countRows(t, conn); n != 36 {
		t.Fatalf("reader sees %d rows, want 36", n)
	}
}

func TestWaitForReturnsOnceApplied(t *testing.T) {
	l := newLeader(t)
	l.insert(1)
	l.ship()
	f, err := Open(context.Background(), filepath.Join(t.TempDir(), "f.db"), l.store, Options{PollInterval: 5 * time.Millisecond, Logger: quiet()})
	must(t, err)

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	err = f.WaitFor(short, f.Pos().TXID+1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a TXID nobody wrote: %v, want a deadline error", err)
	}
	if st := f.Stats(); st.LagTXIDs != 1 {
		t.Fatalf("after a client asked for TXID+1 the lag is %d TXIDs, want 1", st.LagTXIDs)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	l.insert(1)
	l.ship()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	must(t, f.WaitFor(wctx, l.db.Pos().TXID))
	wcancel()
	if st := f.Stats(); st.LagTXIDs != 0 || st.Applied != 1 {
		t.Fatalf("stats after catching up: %+v", st)
	}
	stop()
	<-done

	// Close wakes waiters.
	waitErr := make(chan error, 1)
	go func() { waitErr <- f.WaitFor(context.Background(), 1000) }()
	time.Sleep(10 * time.Millisecond)
	must(t, f.Close())
	if err := <-waitErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitFor after Close: %v, want ErrClosed", err)
	}
}

func countRows(t *testing.T, conn *sqlite.Conn) int64 {
	t.Helper()
	var n int64
	must(t, sqlitex.Execute(conn, "SELECT count(*) FROM t", &sqlitex.ExecOptions{
		ResultFunc: func(st *sqlite.Stmt) error { n = st.ColumnInt64(0); return nil }}))
	return n
}

// contentHash hashes every row of t and the schema, in order.
func contentHash(t *testing.T, path string) string {
	t.Helper()
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	must(t, err)
	defer conn.Close()
	h := sha256.New()
	must(t, sqlitex.Execute(conn, "SELECT id, x, pad FROM t ORDER BY id", &sqlitex.ExecOptions{
		ResultFunc: func(st *sqlite.Stmt) error {
			fmt.Fprintf(h, "%d %d %x\n", st.ColumnInt64(0), st.ColumnInt64(1), st.ColumnText(2))
			return nil
		}}))
	must(t, sqlitex.Execute(conn, "SELECT name, sql FROM sqlite_schema ORDER BY name", &sqlitex.ExecOptions{
		ResultFunc: func(st *sqlite.Stmt) error { fmt.Fprintf(h, "%s %s\n", st.ColumnText(0), st.ColumnText(1)); return nil }}))
	return fmt.Sprintf("%x", h.Sum(nil))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
