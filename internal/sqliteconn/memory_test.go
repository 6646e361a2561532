package sqliteconn

import (
	"path/filepath"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// SQLite's allocations are counted: filling a page cache shows in
// MemoryUsed and closing the connection gives it back.
func TestMemoryUsedCountsSQLiteAllocations(t *testing.T) {
	before := MemoryUsed()
	conn, err := Open(filepath.Join(t.TempDir(), "m.db"), sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitex.ExecuteScript(conn, `PRAGMA cache_size=-16384;
		CREATE TABLE t(x BLOB);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(4000) FROM n;
		SELECT count(*) FROM t;`, nil); err != nil {
		t.Fatal(err)
	}
	during := MemoryUsed()
	if during-before < 4<<20 {
		t.Fatalf("SQLite memory went from %d to %d bytes with a full 8 MB page cache: not counted", before, during)
	}
	if err := Close(conn); err != nil {
		t.Fatal(err)
	}
	if after := MemoryUsed(); after > before+(1<<20) {
		t.Fatalf("SQLite memory %d bytes after close, %d before: not given back", after, before)
	}
}

// Under a soft heap limit a page cache stops growing near the limit
// (the test above shows the same fill takes more than 4 MB without it).
func TestSoftHeapLimitBoundsPageCaches(t *testing.T) {
	before := MemoryUsed()
	prev := SetSoftHeapLimit(before + 2<<20)
	defer SetSoftHeapLimit(prev)
	conn, err := Open(filepath.Join(t.TempDir(), "m.db"), sqlite.OpenReadWrite|sqlite.OpenCreate)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(conn)
	if err := sqlitex.ExecuteScript(conn, `PRAGMA cache_size=-16384;
		CREATE TABLE t(x BLOB);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(4000) FROM n;
		SELECT count(*) FROM t;`, nil); err != nil {
		t.Fatal(err)
	}
	if during := MemoryUsed(); during-before > 3<<20 {
		t.Fatalf("SQLite memory went from %d to %d bytes under a soft limit of %d more: the caches kept growing", before, during, 2<<20)
	}
}
