package sqlconn

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
)

// One connection keeps one interrupt channel; after a statement was
// interrupted (by its time limit or by its caller) the connection must be
// re-armed and work normally, and a limit must never hit a later statement.
func TestInterruptRearmsTheConnection(t *testing.T) {
	// A generous limit, so a loaded machine under the race detector never
	// runs a short statement past it; the assertions compare against it.
	c, err := Open(filepath.Join(t.TempDir(), "db"), SharedReader, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r"
	read := func(ctx context.Context, sql string) error {
		_, err := c.Exec(ctx, Stmt{SQL: sql})
		return err
	}
	for round := 0; round < 3; round++ {
		// The time limit.
		var e *dberr.Error
		if err := read(context.Background(), long); !errors.As(err, &e) || e.Code != dberr.CodeTimeout || !strings.Contains(e.Message, "time limit") {
			t.Fatalf("round %d: long read got %v, want the statement time limit", round, err)
		}
		if err := read(context.Background(), "SELECT 1"); err != nil {
			t.Fatalf("round %d: read after a timeout: %v", round, err)
		}
		// The caller going away.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		start := time.Now()
		err := read(ctx, long)
		if !errors.As(err, &e) || e.Code != dberr.CodeTimeout || !strings.Contains(e.Message, "cancelled") {
			t.Fatalf("round %d: cancelled read got %v, want an interruption by the caller", round, err)
		}
		if d := time.Since(start); d > 700*time.Millisecond {
			t.Fatalf("round %d: cancellation took %s: it waited for the time limit instead", round, d)
		}
		if err := read(context.Background(), "SELECT 1"); err != nil {
			t.Fatalf("round %d: read after a cancellation: %v", round, err)
		}
	}
	// Statements shorter than the limit, back to back for longer than it:
	// a timer left from one statement must not interrupt another.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		if err := read(context.Background(), "SELECT count(*) FROM (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r LIMIT 200) SELECT i FROM r)"); err != nil {
			t.Fatalf("short statement %d: %v", n, err)
		}
	}
}
