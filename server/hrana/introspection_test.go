package hrana_test

import (
	"strings"
	"testing"
)

// The schema used to compare introspection with a local file.
var introspectionSchema = []string{
	"CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, score REAL DEFAULT 1.5)",
	"CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id) ON DELETE CASCADE, note TEXT, g AS (note || '!') VIRTUAL)",
	"CREATE INDEX child_parent ON child (parent_id, note)",
	"INSERT INTO parent (id, name) VALUES (1, 'a'), (2, 'b')",
	"INSERT INTO child (id, parent_id, note) VALUES (1, 1, 'x'), (2, 2, 'y')",
}

// Introspection pragmas and their table-valued functions, and the pragmas
// ORMs send on connect, answer a read-only token (Hrana and JSON API) as a
// local file answers them.
func TestIntrospectionAnswersAsALocalFile(t *testing.T) {
	base := semServer(t, "i")
	local := localFile(t)
	var setup []any
	for _, q := range introspectionSchema {
		setup = append(setup, hexec(q))
		if a := localAnswer(local, q); a.Err != "" {
			t.Fatalf("local %s: %s", q, a.Err)
		}
	}
	_, res := hranaPipe(t, base, "i", rwToken, nil, append(setup, hclose)...)
	for i, r := range res[:len(setup)] {
		okResult(t, introspectionSchema[i], r)
	}
	same := []string{
		"PRAGMA table_info(parent)",
		"PRAGMA table_xinfo(child)",
		"PRAGMA index_list(child)",
		"PRAGMA index_list(parent)",
		"PRAGMA index_info(child_parent)",
		"PRAGMA index_xinfo(child_parent)",
		"PRAGMA foreign_key_list(child)",
		"PRAGMA foreign_key_check(child)",
		"PRAGMA foreign_key_check",
		"PRAGMA main.table_info('child')",
		"SELECT * FROM pragma_table_info('parent')",
		"SELECT name, type, pk FROM pragma_table_xinfo('child') ORDER BY cid",
		"SELECT m.name, p.name FROM sqlite_master m JOIN pragma_index_list(m.name) p WHERE m.type = 'table' ORDER BY 1, 2",
		"SELECT schema, name, type, ncol FROM pragma_table_list WHERE schema = 'main' ORDER BY name",
		"SELECT seq, name FROM pragma_database_list",
		"PRAGMA collation_list",
		"PRAGMA integrity_check",
		"PRAGMA quick_check(child)",
		"PRAGMA user_version",
		"PRAGMA application_id",
		"PRAGMA read_uncommitted",
		"PRAGMA journal_mode",
		"PRAGMA encoding",
		"PRAGMA read_uncommitted = 1",
		"PRAGMA table_info(missing)",
	}
	for _, q := range same {
		want := localAnswer(local, q)
		baton, res := hranaPipe(t, base, "i", roToken, nil, hexec(q))
		sameAnswer(t, "hrana "+q, hranaAnswer(res[0]), want, true)
		hranaPipe(t, base, "i", roToken, baton, hclose)
		sameAnswer(t, "JSON API "+q, jsonAnswer(t, base, "i", roToken, q), want, false)
	}
	// Settings the server owns: read as they are, set is a no-op (waits,
	// caches) or refused with the reason (durability).
	for q, want := range map[string]string{"PRAGMA synchronous": "i:1", "PRAGMA foreign_keys": "i:1", "PRAGMA busy_timeout": "i:30000"} {
		if got := jsonAnswer(t, base, "i", roToken, q); got.Err != "" || len(got.Rows) != 1 || got.Rows[0][0] != want {
			t.Errorf("%s: %v, want %s", q, got, want)
		}
	}
	for _, q := range []string{"PRAGMA busy_timeout = 5000", "PRAGMA cache_size = -2000", "PRAGMA temp_store = MEMORY"} {
		if got := jsonAnswer(t, base, "i", roToken, q); got.Err != "" {
			t.Errorf("%s: %v, want a no-op", q, got)
		}
	}
	for _, q := range []string{"PRAGMA journal_mode = DELETE", "PRAGMA synchronous = OFF"} {
		for _, token := range []string{rwToken, roToken} {
			if got := jsonAnswer(t, base, "i", token, q); !strings.Contains(got.Err, "set by the server") {
				t.Errorf("%s: %v, want a refusal that says the server sets it", q, got)
			}
		}
	}
	if got := jsonAnswer(t, base, "i", rwToken, "PRAGMA journal_mode"); len(got.Rows) != 1 || got.Rows[0][0] != "t:wal" {
		t.Fatalf("journal_mode after the refused change: %v", got)
	}
}
