package groupcommit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
)

func TestGroupCommitOneFailureLeavesOthersCommitted(t *testing.T) {
	store := newFileStore(t)
	rec := &groupRecorder{}
	db := openDB(t, store, func(o *Options) { o.Observer = rec })
	write(t, db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	write(t, db, "INSERT INTO t VALUES (1000, 'taken')")
	release := make(chan struct{})
	go db.Submit(context.Background(), func(c sqlconn.Conn) error { <-release; return nil })
	for db.Queued() != 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	const n = 40
	errs := make([]error, n)
	books := make([]ltx.TXID, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := int64(i)
			if i == 17 {
				id = 1000 // duplicate primary key: this request alone fails
			}
			books[i], errs[i] = db.Submit(context.Background(), func(c sqlconn.Conn) error {
				_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (?, 'x')", Args: []sqlconn.Value{{Type: sqlconn.Integer, Int: id}}})
				return err
			})
		}()
	}
	for db.Queued() < n {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		var e *dberr.Error
		if i == 17 {
			if !errors.As(err, &e) || !strings.HasPrefix(e.Code, "SQLITE_CONSTRAINT") || httperr.Status(e) != 409 {
				t.Errorf("duplicate insert: got %v, want SQLITE_CONSTRAINT 409", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
		if books[i] == 0 {
			t.Errorf("request %d: no bookmark", i)
		}
	}
	rec.mu.Lock()
	biggest := 0
	for _, s := range rec.sizes {
		biggest = max(biggest, s)
	}
	rec.mu.Unlock()
	// The failing request is answered on its own; the other n-1 commit together.
	if biggest != n-1 {
		t.Fatalf("largest committed group had %d requests, want the %d queued requests that succeeded", biggest, n-1)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM t"); got != n {
		t.Fatalf("local rows = %d, want %d", got, n)
	}
	// Sync durability: every acknowledged write is in the bucket.
	if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != n {
		t.Fatalf("restored rows = %d, want %d", got, n)
	}
}

func TestEveryAcknowledgedWriteIsInTheBucket(t *testing.T) {
	store := newFileStore(t)
	db := openDB(t, store, nil)
	write(t, db, "CREATE TABLE t(x)")
	var last ltx.TXID
	for i := 1; i <= 5; i++ {
		b := write(t, db, "INSERT INTO t VALUES (?)", sqlconn.Value{Type: sqlconn.Integer, Int: int64(i)})
		if b <= last {
			t.Fatalf("bookmark did not advance: %d after %d", b, last)
		}
		last = b
		if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != int64(i) {
			t.Fatalf("after write %d the bucket restores %d rows", i, got)
		}
	}
	// Concurrent writers: after all return, the bucket holds every one.
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
				_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (-1)"})
				return err
			}); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d concurrent writes failed", failed.Load())
	}
	if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != 69 {
		t.Fatalf("bucket restores %d rows, want 69", got)
	}
}

// A write whose upload failed is committed locally: it is answered
// COMMITTED_NOT_DURABLE (not a retryable 503) with the bookmark at which it
// becomes durable, and the next upload ships it.
func TestUploadFailureIsNotDurableAndShippedLater(t *testing.T) {
	base := newFileStore(t)
	store := &flakyStore{Store: base}
	db := openDB(t, store, nil)
	write(t, db, "CREATE TABLE t(x)")
	store.failing.Store(true)
	before := db.rep.Pos().TXID
	b, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (7)"})
		return err
	})
	var nd *NotDurableError
	if !errors.As(err, &nd) || nd.Err.Code != dberr.CodeNotDurable || httperr.Status(nd.Err) != 500 || !strings.Contains(nd.Err.Message, "committed locally") {
		t.Fatalf("write during outage: got %v, want COMMITTED_NOT_DURABLE saying it is committed locally", err)
	}
	if b != before+1 || nd.TXID != b {
		t.Fatalf("not-durable bookmark %d (error says %d), want %d", b, nd.TXID, before+1)
	}
	if n, _ := db.Unshipped(); n == 0 {
		t.Fatal("no unshipped commit during the outage")
	}
	store.failing.Store(false)
	write(t, db, "INSERT INTO t VALUES (8)")
	if now := db.rep.Pos().TXID; now < b {
		t.Fatalf("durable bookmark %d after the next upload, want >= %d", now, b)
	}
	if got := restoredCount(t, base, "SELECT sum(x) FROM t"); got != 15 {
		t.Fatalf("bucket sum = %d, want 15 (the not-durable write shipped by the next upload)", got)
	}
	if n, _ := db.Unshipped(); n != 0 {
		t.Fatalf("unshipped = %d after a successful upload", n)
	}
}

func TestFencedDatabaseStopsTakingWrites(t *testing.T) {
	store := newFileStore(t)
	dbA := openDB(t, store, nil)
	write(t, dbA, "CREATE TABLE t(x)")
	dbB := openDB(t, store, nil) // restored from the bucket
	write(t, dbB, "INSERT INTO t VALUES ('b')")
	_, err := dbA.Submit(context.Background(), func(c sqlconn.Conn) error {
		_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES ('a')"})
		return err
	})
	var e *dberr.Error
	if !errors.As(err, &e) || httperr.Status(e) != 503 || !strings.Contains(e.Message, "no longer its writer") {
		t.Fatalf("write on the fenced host: got %v, want 503 no longer its writer", err)
	}
	_, err = dbA.Submit(context.Background(), func(c sqlconn.Conn) error { return nil })
	if !errors.As(err, &e) || !strings.Contains(e.Message, "no longer its writer") {
		t.Fatalf("later write on the fenced host: got %v", err)
	}
	if got := restoredCount(t, store, "SELECT count(*) FROM t WHERE x = 'a'"); got != 0 {
		t.Fatal("the fenced writer's row reached the bucket")
	}
	if got := restoredCount(t, store, "SELECT count(*) FROM t WHERE x = 'b'"); got != 1 {
		t.Fatal("the owner's row is missing from the bucket")
	}
}

func TestAsyncAcknowledgesThenShips(t *testing.T) {
	store := newFileStore(t)
	db := openDB(t, store, func(o *Options) { o.Durability = Async })
	write(t, db, "CREATE TABLE t(x)")
	for i := 0; i < 20; i++ {
		write(t, db, "INSERT INTO t VALUES (1)")
	}
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := db.Unshipped(); n != 0; n, _ = db.Unshipped() {
		if time.Now().After(deadline) {
			t.Fatalf("async loss window never closed: %d unshipped", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != 20 {
		t.Fatalf("bucket rows = %d", got)
	}
}
