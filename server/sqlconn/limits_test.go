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

// A client asking SQLite for a gigabyte value (zeroblob, randomblob,
// replace's output) must get SQLITE_TOOBIG naming the server's limit at
// once, not a gigabyte built under SQLite's process-wide allocator lock
// (printf gives up at the limit and returns NULL, as SQLite does on a local
// file with the same limit); a value under the limit still works.
func TestLengthLimitRefusesHugeValues(t *testing.T) {
	SetMaxLength(4<<20, "limits.max-value-bytes")
	defer SetMaxLength(0, "")
	c, err := Open(filepath.Join(t.TempDir(), "db"), SharedReader, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{
		"SELECT zeroblob(999999999)",
		"SELECT length(randomblob(999999999))",
		"SELECT length(replace(printf('%.*c', 3000000, 'x'), 'x', 'yy'))",
	} {
		start := time.Now()
		_, err := c.Exec(context.Background(), Stmt{SQL: q})
		var e *dberr.Error
		if !errors.As(err, &e) || e.Code != "SQLITE_TOOBIG" || !strings.Contains(e.Message, "limits.max-value-bytes") || !strings.Contains(e.Message, "4194304 bytes") {
			t.Fatalf("%s: got %v, want SQLITE_TOOBIG naming limits.max-value-bytes and its size", q, err)
		}
		t.Logf("%s: refused in %s: %s", q, time.Since(start).Round(time.Millisecond), e.Message)
	}
	start := time.Now()
	res, err := c.Exec(context.Background(), Stmt{SQL: "SELECT printf('%.*c', 999999999, 'x') IS NULL", WantRows: true})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0].Int != 1 {
		t.Fatalf("printf past the limit: %+v, %v; want NULL", res.Rows, err)
	}
	t.Logf("printf of 999999999 characters: NULL in %s", time.Since(start).Round(time.Millisecond))
	res, err = c.Exec(context.Background(), Stmt{SQL: "SELECT length(printf('%.*c', 3000000, 'x'))", WantRows: true})
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0].Int != 3000000 {
		t.Fatalf("a 3 MB value under the 4 MiB limit: %+v, %v", res.Rows, err)
	}
}

// A pooled connection that streamed one huge value must not keep a scratch
// buffer as large as it for the rest of its life; small ones are reused.
func TestRowScratchIsGivenBackAfterAHugeValue(t *testing.T) {
	c, err := Open(filepath.Join(t.TempDir(), "db"), SharedReader, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := func(n int) {
		w := &lenWriter{}
		if _, err := c.Exec(context.Background(), Stmt{SQL: "SELECT printf('%.*c', ?, 'x')", Args: []Value{{Type: Integer, Int: int64(n)}}, WantRows: true, Rows: w}); err != nil {
			t.Fatal(err)
		}
		if w.n != n {
			t.Fatalf("read %d bytes, want %d", w.n, n)
		}
	}
	read(10_000)
	if cap(c.row.scratch) < 10_000 {
		t.Fatalf("small scratch not kept: cap %d", cap(c.row.scratch))
	}
	read(8 << 20)
	if cap(c.row.scratch) > scratchKeep {
		t.Fatalf("after an 8 MiB value the connection keeps a %d-byte scratch buffer", cap(c.row.scratch))
	}
}

type lenWriter struct{ n int }

func (w *lenWriter) Columns([]Column) {}
func (w *lenWriter) Row(r *Row)       { w.n += len(r.Bytes(0)) }

// The statement time limit cannot interrupt one SQL function call, so with
// SQLite's gigabyte length limit a statement building huge values ran
// seconds past it; under the length limit it stops within one call's work.
func TestTimeLimitHoldsUnderTheLengthLimit(t *testing.T) {
	SetMaxLength(16<<20, "limits.max-value-bytes")
	defer SetMaxLength(0, "")
	const limit = time.Second
	c, err := Open(filepath.Join(t.TempDir(), "db"), SharedReader, limit)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One call at the length limit, timed on this machine in this run on a
	// connection without a tight limit (the race detector makes it seconds):
	// the bound below is counted in such calls.
	ref, err := Open(filepath.Join(t.TempDir(), "ref"), SharedReader, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := ref.Exec(context.Background(), Stmt{SQL: "SELECT length(randomblob(16000000))"}); err != nil {
		t.Fatal(err)
	}
	one := time.Since(start)
	ref.Close()
	for _, q := range []string{
		"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT sum(length(randomblob(16000000))) FROM r",
		"WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT sum(length(replace(printf('%.*c', 8000000, 'x'), 'x', 'yy'))) FROM r",
		"SELECT length(randomblob(999999999))",
	} {
		start := time.Now()
		_, err := c.Exec(context.Background(), Stmt{SQL: q})
		took := time.Since(start)
		var e *dberr.Error
		if !errors.As(err, &e) || (e.Code != dberr.CodeTimeout && e.Code != "SQLITE_TOOBIG") {
			t.Fatalf("%s: %v, want the time limit or the length limit", q, err)
		}
		// The limit plus the call in flight when it struck, with room for a
		// loaded machine: one call on a 16 MiB value takes about 0.3 s without
		// the race detector; without the length limit such statements ran
		// 1.2 to 8 s past a 1 s limit.
		if bound := limit + 3*one + time.Second; took > bound {
			t.Fatalf("%s: answered after %s with a %s limit (one call at the length limit: %s; bound %s)", q, took, limit, one, bound)
		}
		t.Logf("%s: %s after %s", q, e.Code, took.Round(time.Millisecond))
	}
}
