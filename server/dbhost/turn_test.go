package dbhost

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// A client opens a write transaction and walks away: another client's write
// waits only the idle-write timeout, not the whole transaction timeout; the
// abandoned transaction is rolled back (its row never appears) and its
// session's next statement says why, naming the limit. A transaction whose
// client keeps working is never revoked, however long others wait.
func TestIdleWriteTransactionGivesWayToWaitingWriters(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), func(o *Options) { o.IdleWriteTimeout = 100 * time.Millisecond })
	ctx := context.Background()
	db, err := h.Create(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, "CREATE TABLE t(who TEXT)")

	abandoned, err := db.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, abandoned, "BEGIN IMMEDIATE")
	mustExec(t, abandoned, "INSERT INTO t VALUES ('abandoned')")
	start := time.Now()
	write(t, db, "INSERT INTO t VALUES ('other')")
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the other write waited %s behind an abandoned transaction", d)
	}
	t.Logf("the other write waited %s", time.Since(start).Round(time.Millisecond))
	_, err = abandoned.Exec(ctx, sqlconn.Stmt{SQL: "COMMIT"})
	var e *dberr.Error
	if !errors.As(err, &e) || e.Code != dberr.CodeTransactionTimeout || !strings.Contains(e.Message, "limits.idle-write-timeout") {
		t.Fatalf("the abandoned session's next statement: %v, want TRANSACTION_TIMEOUT naming limits.idle-write-timeout", err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t WHERE who = 'abandoned'"); n != 0 {
		t.Fatalf("the abandoned transaction's row is there (%d)", n)
	}

	// A busy transaction keeps the lock: statements every 20 ms for 600 ms
	// while a write waits; the write goes once it commits.
	busy, err := db.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close(ctx)
	mustExec(t, busy, "BEGIN IMMEDIATE")
	done := make(chan error, 1)
	go func() {
		_, err := db.Write(ctx, func(c sqlconn.Conn) error {
			_, err := c.Exec(ctx, sqlconn.Stmt{SQL: "INSERT INTO t VALUES ('waiting')"})
			return err
		})
		done <- err
	}()
	for i := range 30 {
		mustExec(t, busy, "INSERT INTO t VALUES ('busy')")
		time.Sleep(20 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("the waiting write went after %d statements of a busy transaction (%v)", i, err)
		default:
		}
	}
	mustExec(t, busy, "COMMIT")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM t WHERE who = 'busy'"); n != 30 {
		t.Fatalf("busy rows %d, want 30", n)
	}
}

// Every open slot taken, one by a database kept open only by a session that
// changed its connection and then sat idle: opening another database closes
// that one instead of failing, and the session is told why.
func TestIdlePinningSessionGivesUpItsSlot(t *testing.T) {
	h := newHost(t, newFileStore(t), t.TempDir(), func(o *Options) {
		o.MaxOpen = 2
		o.PinnedSessionIdle = 50 * time.Millisecond
	})
	ctx := context.Background()
	pinned, err := h.Create(ctx, "pinned")
	if err != nil {
		t.Fatal(err)
	}
	s, err := pinned.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, s, "CREATE TEMP TABLE mine(x)")
	busy, err := h.Create(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := busy.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	mustExec(t, s2, "BEGIN") // a transaction: never closed for room
	time.Sleep(100 * time.Millisecond)
	third, err := h.Create(ctx, "third")
	if err != nil {
		t.Fatalf("opening a third database with one slot pinned by an idle session: %v", err)
	}
	write(t, third, "CREATE TABLE t(x)")
	_, err = s.Exec(ctx, sqlconn.Stmt{SQL: "SELECT * FROM mine"})
	var e *dberr.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "limits.pinned-session-idle") {
		t.Fatalf("the idle session's next statement: %v, want an error naming limits.pinned-session-idle", err)
	}
	if _, err := s2.Exec(ctx, sqlconn.Stmt{SQL: "SELECT 1"}); err != nil {
		t.Fatalf("the session inside a transaction was closed: %v", err)
	}
}
