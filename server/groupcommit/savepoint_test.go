package groupcommit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/sqlconn"
)

// A request that leaves a savepoint open must not let a later request in the
// same group roll back to it: that would undo writes between the two that
// were already promised to other clients.
func TestASavepointCannotReachIntoOtherRequestsOfTheGroup(t *testing.T) {
	store := newFileStore(t)
	db := openDB(t, store, nil)
	write(t, db, "CREATE TABLE t(k TEXT)")
	release := make(chan struct{})
	go db.Submit(context.Background(), func(c sqlconn.Conn) error { <-release; return nil })
	for db.Queued() != 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)

	sqls := []string{
		"INSERT INTO t VALUES ('a1'); SAVEPOINT sp",   // leaves sp open
		"INSERT INTO t VALUES ('c1')",                 // an unrelated client
		"INSERT INTO t VALUES ('b1'); ROLLBACK TO sp", // reaches for sp
		"SAVEPOINT mine; INSERT INTO t VALUES ('d1'); RELEASE mine",
	}
	errs := make([]error, len(sqls))
	done := make(chan int, len(sqls))
	for i, q := range sqls {
		go func() {
			_, errs[i] = db.Submit(context.Background(), func(c sqlconn.Conn) error {
				_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: q})
				return err
			})
			done <- i
		}()
		for db.Queued() < i+1 { // queue them in this order: one group
			time.Sleep(time.Millisecond)
		}
	}
	close(release)
	for range sqls {
		<-done
	}
	for i, err := range errs {
		if i == 2 {
			if err == nil || !strings.Contains(err.Error(), "no such savepoint") {
				t.Errorf("ROLLBACK TO another request's savepoint: err = %v, want no such savepoint", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("request %d (%s): %v", i, sqls[i], err)
		}
	}
	const want = "a1,c1,d1"
	if got := queryString(t, db, "SELECT group_concat(k, ',') FROM (SELECT k FROM t ORDER BY k)"); got != want {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != 3 {
		t.Fatalf("restored rows = %d, want 3", got)
	}
}
