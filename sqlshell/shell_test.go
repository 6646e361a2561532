package sqlshell_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/sqlshell"
)

// runShell feeds script to a shell on db, as a pipe on stdin would.
func runShell(t *testing.T, db sqlshell.Backend, script string, history string) (stdout, stderr string, errs int) {
	t.Helper()
	var out, errOut bytes.Buffer
	sh := &sqlshell.Shell{DB: db, Out: &out, ErrOut: &errOut, HistoryFile: history}
	if err := sh.Run(context.Background(), strings.NewReader(script)); err != nil {
		t.Fatalf("shell: %v\n%s", err, errOut.String())
	}
	return out.String(), errOut.String(), sh.Errors()
}

func openLocal(t *testing.T, path string, create bool) *sqlshell.Local {
	t.Helper()
	db, err := sqlshell.OpenLocal(path, create)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A script of multi-line statements, a trigger whose body holds ';', every
// output mode and the dot-commands, driven through stdin on a local file.
func TestLocalShell(t *testing.T) {
	dir := t.TempDir()
	if _, err := sqlshell.OpenLocal(filepath.Join(dir, "missing.db"), false); err == nil {
		t.Fatal("a missing local file opened without -create")
	}
	db := openLocal(t, filepath.Join(dir, "app.db"), true)
	readme := filepath.Join(dir, "more.sql")
	if err := os.WriteFile(readme, []byte("INSERT INTO t (msg) VALUES ('from .read');\n.mode csv\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	history := filepath.Join(dir, "history")
	script := `CREATE TABLE t (
  id INTEGER PRIMARY KEY,
  msg TEXT
);
CREATE TABLE audit (n INTEGER);
CREATE TRIGGER tr AFTER INSERT ON t BEGIN
  INSERT INTO audit VALUES (1);
  INSERT INTO audit VALUES (2);
END;
INSERT INTO t (msg) VALUES ('hello'), ('semi;colon'),
  ('it''s');
.tables
.schema t
.mode json
SELECT id, msg FROM t ORDER BY id;
.mode line
SELECT count(*) AS n FROM audit;
.read ` + readme + `
SELECT id, msg FROM t WHERE id >= 3 ORDER BY id;
.mode table
SELECT 1 AS one, NULL AS empty, x'cafe' AS b;
SELEC broken;
.mode nonsense
.backup ` + filepath.Join(dir, "copy.db") + `
.quit
SELECT 'not run';
`
	out, errOut, errs := runShell(t, db, script, history)
	for _, want := range []string{
		"audit  t\n",
		"CREATE TABLE t (\n  id INTEGER PRIMARY KEY,\n  msg TEXT\n);\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN\n  INSERT INTO audit VALUES (1);\n  INSERT INTO audit VALUES (2);\nEND;\n",
		`[{"id":1,"msg":"hello"},` + "\n" + `{"id":2,"msg":"semi;colon"},` + "\n" + `{"id":3,"msg":"it's"}]`,
		"n = 6\n",
		"id,msg\n3,it's\n4,from .read\n",
		"| one | empty | b       |\n+-----+-------+---------+\n| 1   | NULL  | X'CAFE' |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not run") {
		t.Error(".quit did not end the session")
	}
	if errs != 2 || !strings.Contains(errOut, "syntax error") || !strings.Contains(errOut, ".mode nonsense") {
		t.Errorf("errors %d, want 2 (a syntax error, a bad mode):\n%s", errs, errOut)
	}
	h, err := os.ReadFile(history)
	if err != nil || !strings.Contains(string(h), "CREATE TABLE t (   id INTEGER PRIMARY KEY,   msg TEXT );\n") || strings.Contains(string(h), "from .read") || !strings.Contains(string(h), ".mode json") {
		t.Errorf("history file (err %v):\n%s", err, h)
	}

	// The backup is a database of its own with the same rows and schema.
	cp := openLocal(t, filepath.Join(dir, "copy.db"), false)
	got, _, _ := runShell(t, cp, ".mode csv\nSELECT (SELECT count(*) FROM t), (SELECT count(*) FROM audit), (SELECT count(*) FROM sqlite_master WHERE type='trigger');\n", "")
	if !strings.Contains(got, "\n4,8,1\n") {
		t.Errorf("backup holds %q, want 4 rows, 8 audit rows, 1 trigger", got)
	}
	if _, errOut, errs := runShell(t, db, ".backup "+filepath.Join(dir, "copy.db")+"\n", ""); errs != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf(".backup over an existing file: %d errors: %s", errs, errOut)
	}

	// .dump rebuilds the same database.
	dump, _, errs := runShell(t, db, ".dump\n", "")
	if errs != 0 || !strings.HasPrefix(dump, "PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n") || !strings.HasSuffix(dump, "COMMIT;\n") {
		t.Fatalf("dump:\n%s", dump)
	}
	re := openLocal(t, filepath.Join(dir, "re.db"), true)
	if _, errOut, errs := runShell(t, re, dump, ""); errs != 0 {
		t.Fatalf("replaying the dump: %s", errOut)
	}
	again, _, _ := runShell(t, re, ".dump\n", "")
	if again != dump {
		t.Errorf("dump of the replayed dump differs:\n%s\nvs\n%s", again, dump)
	}
}
