package hrana_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The table-recreating migration that drizzle-kit and Prisma generate (and
// @libsql/client's migrate() wraps): foreign keys off, copy the parent into
// a new table, drop the old one, rename, foreign keys on.
var recreateParent = []string{
	"PRAGMA foreign_keys=OFF",
	"CREATE TABLE __new_parent (id INTEGER PRIMARY KEY, name TEXT NOT NULL, extra TEXT)",
	"INSERT INTO __new_parent (id, name) SELECT id, name FROM parent",
	"DROP TABLE parent",
	"ALTER TABLE __new_parent RENAME TO parent",
	"PRAGMA foreign_keys=ON",
}

// familySchema makes 3 parents and 103 children that cascade on delete.
func familySchema() []string {
	out := []string{
		"PRAGMA foreign_keys=ON",
		"CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
		"CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id) ON DELETE CASCADE)",
		"INSERT INTO parent VALUES (1, 'a'), (2, 'b'), (3, 'c')",
	}
	for i := 1; i <= 103; i++ {
		out = append(out, fmt.Sprintf("INSERT INTO child VALUES (%d, %d)", i, i%3+1))
	}
	return out
}

func setupFamily(t *testing.T, base, db string) {
	t.Helper()
	stmts := familySchema()[1:]
	status, out := jsonQuery(t, base, db, rwToken, map[string]any{"batch": func() []any {
		var b []any
		for _, q := range stmts {
			b = append(b, map[string]any{"sql": q})
		}
		return b
	}()}, 30*time.Second)
	if status != http.StatusOK {
		t.Fatalf("setup %s: %d %v", db, status, out)
	}
}

// localChildren runs the schema and then script on a local file and
// counts the children left.
func localChildren(t *testing.T, script []string) any {
	t.Helper()
	local := localFile(t)
	for _, q := range append(familySchema(), script...) {
		if a := localAnswer(local, q); a.Err != "" {
			t.Fatalf("local %s: %s", q, a.Err)
		}
	}
	return localAnswer(local, "SELECT count(*) FROM child").Rows[0][0]
}

// Connection state a client sets (foreign_keys=OFF for a table-recreating
// migration) takes effect for the stream or request that set it, exactly as
// on a local file: the children survive, 103 stay 103. Over Hrana as
// separate requests on one stream (with a baton), as @libsql/client's
// migrate() batch, and as one JSON API batch.
func TestRecreatingMigrationKeepsChildRows(t *testing.T) {
	base := semServer(t, "hrana", "batch", "json", "fkon")
	if want := localChildren(t, recreateParent); want != "i:103" {
		t.Fatalf("local file: %v children after the migration, want 103", want)
	}
	children := func(db string) any { return scalar(t, base, db, "SELECT count(*) FROM child") }

	setupFamily(t, base, "hrana")
	var baton any
	for i, q := range recreateParent {
		var res []map[string]any
		baton, res = hranaPipe(t, base, "hrana", rwToken, baton, hexec(q))
		okResult(t, q, res[0])
		if i == 0 {
			// Another client meanwhile still has foreign keys on.
			status, out := jsonQuery(t, base, "hrana", rwToken, map[string]any{"sql": "INSERT INTO child VALUES (1000, 99)"}, 5*time.Second)
			if status == http.StatusOK || !strings.Contains(fmt.Sprint(out), "FOREIGN KEY") {
				t.Fatalf("another client's orphan insert while this stream has foreign keys off: %d %v", status, out)
			}
		}
	}
	hranaPipe(t, base, "hrana", rwToken, baton, hclose)
	if n := children("hrana"); n != 103.0 {
		t.Fatalf("Hrana stream: %v children after the migration, want 103 as on a local file", n)
	}

	// @libsql/client's migrate(): one batch, foreign keys off around a
	// transaction, and close, in one pipeline.
	setupFamily(t, base, "batch")
	steps := []any{map[string]any{"stmt": hexec("PRAGMA foreign_keys=off")["stmt"]}, map[string]any{"stmt": hexec("BEGIN DEFERRED")["stmt"]}}
	for i, q := range recreateParent[1 : len(recreateParent)-1] {
		steps = append(steps, map[string]any{"stmt": hexec(q)["stmt"], "condition": map[string]any{"type": "and", "conds": []any{
			map[string]any{"type": "ok", "step": i + 1}, map[string]any{"type": "not", "cond": map[string]any{"type": "is_autocommit"}}}}})
	}
	commit := len(steps)
	steps = append(steps, map[string]any{"stmt": hexec("COMMIT")["stmt"], "condition": map[string]any{"type": "ok", "step": commit - 1}},
		map[string]any{"stmt": hexec("ROLLBACK")["stmt"], "condition": map[string]any{"type": "not", "cond": map[string]any{"type": "ok", "step": commit}}},
		map[string]any{"stmt": hexec("PRAGMA foreign_keys=on")["stmt"]})
	_, res := hranaPipe(t, base, "batch", rwToken, nil, map[string]any{"type": "batch", "batch": map[string]any{"steps": steps}}, hclose)
	batch := okResult(t, "migrate batch", res[0])
	for i, e := range batch["step_errors"].([]any) {
		if e != nil {
			t.Fatalf("migrate batch step %d: %v", i, e)
		}
	}
	if n := children("batch"); n != 103.0 {
		t.Fatalf("migrate() batch: %v children after the migration, want 103 as on a local file", n)
	}

	// The JSON API: the same statements as one batch.
	setupFamily(t, base, "json")
	var batchStmts []any
	for _, q := range recreateParent {
		batchStmts = append(batchStmts, map[string]any{"sql": q})
	}
	if status, out := jsonQuery(t, base, "json", rwToken, map[string]any{"batch": batchStmts}, 30*time.Second); status != http.StatusOK {
		t.Fatalf("JSON API migration: %d %v", status, out)
	}
	if n := children("json"); n != 103.0 {
		t.Fatalf("JSON API batch: %v children after the migration, want 103 as on a local file", n)
	}
	for _, db := range []string{"hrana", "batch", "json"} {
		if n := scalar(t, base, db, "SELECT count(*) FROM pragma_foreign_key_check"); n != 0.0 {
			t.Fatalf("%s: %v foreign key violations after the migration", db, n)
		}
		// Foreign keys are on again for everyone: the setting did not leak.
		if status, _ := jsonQuery(t, base, db, rwToken, map[string]any{"sql": "DELETE FROM parent WHERE id = 1"}, 5*time.Second); status != http.StatusOK {
			t.Fatalf("%s: delete parent: %d", db, status)
		}
		if n := children(db); n != 103.0-34 { // parent 1 has the 34 children whose id is a multiple of 3
			t.Fatalf("%s: %v children after deleting a parent, want the cascade to leave 69", db, n)
		}
	}

	// Without foreign_keys=OFF the drop cascades, on the local file and here alike.
	want := localChildren(t, recreateParent[1:len(recreateParent)-1])
	setupFamily(t, base, "fkon")
	for _, q := range recreateParent[1 : len(recreateParent)-1] {
		_, res := hranaPipe(t, base, "fkon", rwToken, nil, hexec(q), hclose)
		okResult(t, q, res[0])
	}
	if got := children("fkon"); fmt.Sprintf("i:%v", got) != want {
		t.Fatalf("with foreign keys on: %v children here, %v on a local file", got, want)
	}
}

// TEMP objects and connection settings belong to the stream (or request)
// that made them: its later requests see them, no other client does, and
// another client's statements never run its TEMP triggers.
func TestTempObjectsAndSettingsStayWithTheirStream(t *testing.T) {
	base := semServer(t, "s")
	setupFamily(t, base, "s")
	baton, res := hranaPipe(t, base, "s", rwToken, nil,
		hexec("CREATE TEMP TABLE copied (id)"),
		hexec("CREATE TEMP TRIGGER copy AFTER INSERT ON main.parent BEGIN INSERT INTO copied VALUES (new.id); END"),
		hexec("PRAGMA case_sensitive_like = ON"),
		hexec("INSERT INTO parent VALUES (10, 'mine')"),
		hexec("SELECT count(*) FROM copied"),
		hexec("SELECT 'a' LIKE 'A'"))
	for i, r := range res {
		okResult(t, fmt.Sprintf("stream A request %d", i), r)
	}
	if got := hranaRows(okResult(t, "", res[4])); got[0][0] != "1" {
		t.Fatalf("the stream's own TEMP trigger copied %v rows, want 1", got)
	}
	if got := hranaRows(okResult(t, "", res[5])); got[0][0] != "0" {
		t.Fatalf("case_sensitive_like did not take effect on its stream: %v", got)
	}
	// Another client: no TEMP table, its inserts are not copied, LIKE as usual.
	_, other := hranaPipe(t, base, "s", rwToken, nil,
		hexec("INSERT INTO parent VALUES (11, 'theirs')"),
		hexec("SELECT count(*) FROM temp.sqlite_master"),
		hexec("SELECT 'a' LIKE 'A'"),
		hexec("SELECT * FROM copied"), hclose)
	okResult(t, "other insert", other[0])
	if got := hranaRows(okResult(t, "", other[1])); got[0][0] != "0" {
		t.Fatalf("another stream sees %v TEMP objects", got)
	}
	if got := hranaRows(okResult(t, "", other[2])); got[0][0] != "1" {
		t.Fatalf("case_sensitive_like leaked into another stream: %v", got)
	}
	if other[3]["type"] != "error" || !strings.Contains(fmt.Sprint(other[3]["error"]), "no such table: copied") {
		t.Fatalf("another stream reads the TEMP table: %v", other[3])
	}
	if status, out := jsonQuery(t, base, "s", rwToken, map[string]any{"sql": "INSERT INTO parent VALUES (12, 'json')"}, 5*time.Second); status != http.StatusOK {
		t.Fatalf("JSON API insert while a stream holds a TEMP trigger: %d %v", status, out)
	}
	// The stream still has them in a later request; others' rows were not copied.
	baton, res = hranaPipe(t, base, "s", rwToken, baton, hexec("SELECT group_concat(id) FROM copied"), hexec("SELECT count(*) FROM sqlite_master WHERE name = 'copied'"))
	if got := hranaRows(okResult(t, "", res[0])); got[0][0] != "10" {
		t.Fatalf("the TEMP table holds %v, want only the stream's own row 10", got)
	}
	if got := hranaRows(okResult(t, "", res[1])); got[0][0] != "0" {
		t.Fatal("a TEMP table shows in sqlite_master")
	}
	hranaPipe(t, base, "s", rwToken, baton, hclose)
	// A JSON API request's TEMP objects live for that request only.
	status, out := jsonQuery(t, base, "s", rwToken, map[string]any{"batch": []any{
		map[string]any{"sql": "CREATE TEMP TABLE scratch AS SELECT 7 AS v"}, map[string]any{"sql": "SELECT v FROM scratch"}}}, 30*time.Second)
	if status != http.StatusOK || !strings.Contains(fmt.Sprint(out), "[7]") {
		t.Fatalf("JSON API TEMP table: %d %v", status, out)
	}
	if status, out := jsonQuery(t, base, "s", rwToken, map[string]any{"sql": "SELECT * FROM scratch"}, 5*time.Second); status == http.StatusOK {
		t.Fatalf("a later request sees the TEMP table: %v", out)
	}
	if n := scalar(t, base, "s", "SELECT count(*) FROM parent"); n != 6.0 {
		t.Fatalf("%v parents, want 6", n)
	}
}
