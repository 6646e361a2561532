package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// countForever never finishes on its own.
const countForever = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"

// A context's end interrupts the statement it watches, and only that one:
// the next statement on the connection runs to the end.
func TestConnInterruptsOnlyTheStatementWhoseContextEnded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	newApp(t, path).exec("CREATE TABLE u (x)")
	c, err := openConn(path)
	must(t, err)
	defer c.Close()

	for round := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		start := time.Now()
		_, err := queryInt(ctx, c, countForever)
		cancel()
		if sqlite.ErrCode(err) != sqlite.ResultInterrupt {
			t.Fatalf("round %d: a statement whose context ended after 50 ms returned %v after %s, want SQLITE_INTERRUPT", round, err, time.Since(start))
		}
		// Contexts that end after the statement, or never, leave the next ones alone.
		for _, ctx := range []context.Context{nil, context.Background(), t.Context()} {
			n, err := queryInt(ctx, c, "SELECT 41 + 1")
			if err != nil || n != 42 {
				t.Fatalf("round %d: the statement after an interrupted one: %d, %v", round, n, err)
			}
		}
		short, cancelShort := context.WithCancel(context.Background())
		must(t, exec(short, c, "INSERT INTO u VALUES (1)"))
		cancelShort() // ends after its statement finished
		if n, err := queryInt(context.Background(), c, "SELECT count(*) FROM u"); err != nil || n != int64(round+1) {
			t.Fatalf("round %d: count after a context ended late: %d, %v", round, n, err)
		}
	}
	// A context that has already ended stops the statement before it runs.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sqlitex.ExecuteTransient(c.Conn, "SELECT 1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := queryInt(done, c, countForever); sqlite.ErrCode(err) != sqlite.ResultInterrupt {
		t.Fatalf("a statement under an ended context returned %v, want SQLITE_INTERRUPT", err)
	}
}
