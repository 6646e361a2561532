package hrana_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Statements whose effect depends on the schema (DROP ... IF EXISTS,
// CREATE ... IF NOT EXISTS) run however many times a client sends them, on
// whichever database, in whatever order the process saw their text before:
// where a statement runs is decided by SQLite when it prepares it on the
// connection at hand, never remembered by its text.
func TestIfExistsStatementsRunAnyNumberOfTimes(t *testing.T) {
	base := semServer(t, "a", "b")
	idempotent := []string{
		"DROP TRIGGER IF EXISTS tr",
		"DROP VIEW IF EXISTS v",
		"DROP INDEX IF EXISTS i",
		"DROP TABLE IF EXISTS t",
		"CREATE TABLE IF NOT EXISTS t (x)",
		"CREATE INDEX IF NOT EXISTS i ON t (x)",
		"CREATE VIEW IF NOT EXISTS v AS SELECT x FROM t",
		"CREATE TRIGGER IF NOT EXISTS tr AFTER INSERT ON t BEGIN SELECT 1; END",
	}
	run := func(db, how, sql string) {
		t.Helper()
		if how == "hrana" {
			_, res := hranaPipe(t, base, db, rwToken, nil, hexec(sql), hclose)
			okResult(t, db+": "+sql, res[0])
			return
		}
		if status, out := jsonQuery(t, base, db, rwToken, map[string]any{"sql": sql}, 30*time.Second); status != http.StatusOK {
			t.Fatalf("%s: %s: HTTP %d %v", db, sql, status, out)
		}
	}
	// Database b sees every text first while its objects are missing, then a
	// while they exist, and the other way round; each script runs three times.
	for round := range 3 {
		for _, how := range []string{"hrana", "json"} {
			for _, db := range []string{"b", "a"} {
				for _, sql := range idempotent {
					run(db, how, sql)
				}
				status, out := jsonQuery(t, base, db, rwToken, map[string]any{"sql": "INSERT INTO t VALUES (1)"}, 30*time.Second)
				if status != http.StatusOK {
					t.Fatalf("round %d: insert: %d %v", round, status, out)
				}
			}
		}
		// The drops of the next round find the objects in place.
		for _, db := range []string{"a", "b"} {
			if n := scalar(t, base, db, "SELECT count(*) FROM sqlite_master WHERE name IN ('t', 'i', 'v', 'tr')"); n != 4.0 {
				t.Fatalf("round %d: %s has %v of its 4 objects", round, db, n)
			}
		}
	}
	// The drops remove what exists, and only one row (the last script's) is left.
	for _, db := range []string{"a", "b"} {
		if n := scalar(t, base, db, "SELECT count(*) FROM t"); n != 1.0 {
			t.Fatalf("%s: %v rows, want 1 (each script dropped and recreated the table)", db, n)
		}
	}
	// A read-only token's DROP of an existing table is refused as a write,
	// whatever the same text did before for a read-write token.
	_, res := hranaPipe(t, base, "a", roToken, nil, hexec("DROP TABLE IF EXISTS t"), hclose)
	if res[0]["type"] != "error" || !strings.Contains(res[0]["error"].(map[string]any)["message"].(string), "readonly") {
		t.Fatalf("read-only DROP TABLE: %v", res[0])
	}
	if n := scalar(t, base, "a", "SELECT count(*) FROM sqlite_master WHERE name = 't'"); n != 1.0 {
		t.Fatal("a read-only token dropped a table")
	}
}
