package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// A request whose statements leave a deferred foreign key unsatisfied fails
// alone, as its own COMMIT would on a local file; the other requests of its
// group commit. Django declares every foreign key DEFERRABLE INITIALLY
// DEFERRED, so SQLite accepts each INSERT and only a COMMIT sees the
// violation: before, that COMMIT was the group's and failed everyone.
func TestADeferredForeignKeyViolationFailsOnlyItsRequest(t *testing.T) {
	store := newFileStore(t)
	rec := &groupRecorder{}
	db := openDB(t, store, func(o *Options) { o.Observer = rec })
	write(t, db, "CREATE TABLE p(id INTEGER PRIMARY KEY)")
	write(t, db, "CREATE TABLE c(id INTEGER PRIMARY KEY, pid INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)")
	write(t, db, "CREATE TABLE v(x INTEGER)")
	write(t, db, "INSERT INTO p VALUES (1)")

	// Hold the writer so that every request below lands in the same group.
	release, holding := make(chan struct{}), make(chan struct{})
	go db.Submit(context.Background(), func(c sqlconn.Conn) error { close(holding); <-release; return nil })
	<-holding
	rec.mu.Lock()
	rec.sizes = nil
	rec.mu.Unlock()

	const violators, valid, fixers = 100, 200, 20
	// Interleaved, so that violators sit before, between and after the others.
	left := map[string]int{"violator": violators, "valid": valid, "fixer": fixers}
	var kinds []string
	for i := 0; len(kinds) < violators+valid+fixers; i++ {
		for _, k := range []string{[]string{"valid", "violator", "valid", "fixer"}[i%4], "valid", "violator", "fixer"} {
			if left[k] > 0 {
				left[k]--
				kinds = append(kinds, k)
				break
			}
		}
	}
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, kind := range kinds {
		var sqls []string
		switch kind {
		case "violator": // a child whose parent never comes
			sqls = []string{fmt.Sprintf("INSERT INTO c VALUES (%d, %d)", i+1, 100000+i)}
		case "valid":
			sqls = []string{fmt.Sprintf("INSERT INTO v VALUES (%d)", i)}
		case "fixer": // the child first, its parent later in the same request: valid
			sqls = []string{fmt.Sprintf("INSERT INTO c VALUES (%d, %d)", i+1, 200000+i), fmt.Sprintf("INSERT INTO p VALUES (%d)", 200000+i)}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.Submit(context.Background(), func(c sqlconn.Conn) error {
				for _, q := range sqls {
					if _, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: q}); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	for deadline := time.Now().Add(time.Minute); db.Queued() < len(kinds); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of %d requests queued after a minute", db.Queued(), len(kinds))
		}
	}
	close(release)
	wg.Wait()

	okByKind := map[string]int{}
	for i, err := range errs {
		switch {
		case kinds[i] == "violator":
			var e *dberr.Error
			if !errors.As(err, &e) || e.Code != "SQLITE_CONSTRAINT_FOREIGNKEY" || e.Message != "FOREIGN KEY constraint failed" {
				t.Errorf("violator %d: err = %v, want SQLITE_CONSTRAINT_FOREIGNKEY: FOREIGN KEY constraint failed", i, err)
			}
			if err != nil && strings.Contains(err.Error(), "retry") {
				t.Errorf("violator %d was told to retry a write that can never succeed: %v", i, err)
			}
		case err != nil:
			t.Errorf("%s request %d failed: %v", kinds[i], i, err)
		default:
			okByKind[kinds[i]]++
		}
	}
	rec.mu.Lock()
	groups := append([]int(nil), rec.sizes...)
	rec.mu.Unlock()
	t.Logf("%d violators refused, %d valid and %d fixing writes acknowledged; committed groups %v",
		countOf(kinds, "violator"), okByKind["valid"], okByKind["fixer"], groups)
	if okByKind["valid"] != valid || okByKind["fixer"] != fixers {
		t.Fatalf("acknowledged %d valid and %d fixing writes, want %d and %d", okByKind["valid"], okByKind["fixer"], valid, fixers)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM v"); got != valid {
		t.Errorf("local rows in v = %d, want %d", got, valid)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM c"); got != fixers {
		t.Errorf("local rows in c = %d, want %d (only the fixers' children)", got, fixers)
	}
	if got := restoredCount(t, store, "SELECT (SELECT count(*) FROM v) * 1000 + (SELECT count(*) FROM c)"); got != valid*1000+fixers {
		t.Fatalf("restored v*1000+c = %d, want %d", got, valid*1000+fixers)
	}
}

func countOf(kinds []string, k string) int {
	n := 0
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}

// A COMMIT that fails for good is answered with its cause and no invitation
// to retry; one that may pass (a busy or failing disk) still invites it.
func TestAFailedCommitAnswersItsCause(t *testing.T) {
	db := openDB(t, newFileStore(t), nil)
	for _, c := range []struct {
		cause     error
		code      string
		wantRetry bool
	}{
		{dberr.New("SQLITE_CONSTRAINT_FOREIGNKEY", "FOREIGN KEY constraint failed"), "SQLITE_CONSTRAINT_FOREIGNKEY", false},
		{dberr.New("SQLITE_READONLY", "attempt to write a readonly database"), "SQLITE_READONLY", false},
		{dberr.New("SQLITE_IOERR_WRITE", "disk I/O error"), dberr.CodeInternal, true},
		{dberr.New("SQLITE_BUSY", "database is locked"), dberr.CodeInternal, true},
		{dberr.New("SQLITE_FULL", "database or disk is full"), "SQLITE_FULL", true},
	} {
		r := &writeReq{ctx: context.Background(), done: make(chan struct{})}
		db.abortGroup([]*writeReq{r}, "commit failed", c.cause)
		e := dberr.As(r.err)
		if e == nil || e.Code != c.code || strings.HasSuffix(e.Message, "retry") != c.wantRetry || !strings.Contains(e.Message, c.cause.Error()) {
			t.Errorf("cause %v: answered %v; want code %s, retry %v, the cause in the message", c.cause, r.err, c.code, c.wantRetry)
		}
	}
}
