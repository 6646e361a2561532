package sqltext

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"modernc.org/libc"
	lib "modernc.org/sqlite/lib"
)

// sqliteComplete is SQLite's own sqlite3_complete, the reference.
func sqliteComplete(t testing.TB, s string) bool {
	tls := libc.NewTLS()
	defer tls.Close()
	p, err := libc.CString(s)
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Xfree(tls, p)
	return lib.Xsqlite3_complete(tls, p) != 0
}

const trigger = "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET a = CASE WHEN new.b > 0 THEN 1 ELSE 0 END; END;"

func TestStatements(t *testing.T) {
	cases := []struct {
		in    string
		stmts []string
		rest  string
	}{
		{"SELECT 1;", []string{"SELECT 1;"}, ""},
		{"SELECT 1; SELECT 2", []string{"SELECT 1;"}, " SELECT 2"},
		{"SELECT ';' ; x", []string{"SELECT ';' ;"}, " x"},
		{"SELECT 'it''s;'; ", []string{"SELECT 'it''s;';"}, ""},
		{`SELECT "a;b", [c;d], ` + "`e;f`;", []string{`SELECT "a;b", [c;d], ` + "`e;f`;"}, ""},
		{"SELECT 1 -- no; end\n;", []string{"SELECT 1 -- no; end\n;"}, ""},
		{"SELECT /* ; */ 1;", []string{"SELECT /* ; */ 1;"}, ""},
		{"SELECT 'open;\n", nil, "SELECT 'open;\n"},
		{"/* open ;", nil, "/* open ;"},
		{"-- only a comment\n", nil, ""},
		{"SELECT 1; -- trailing comment, no newline", []string{"SELECT 1;"}, ""},
		{";;  ;", nil, ""},
		{trigger + " SELECT 1;", []string{trigger, "SELECT 1;"}, ""},
		{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = CASE WHEN 1 THEN 2 END; DELETE FROM u; END; SELECT 1;",
			[]string{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = CASE WHEN 1 THEN 2 END; DELETE FROM u; END;", "SELECT 1;"}, ""},
		{"create temp trigger tr after insert on t begin\n select 1;\n", nil, "create temp trigger tr after insert on t begin\n select 1;\n"},
		{"EXPLAIN CREATE TEMPORARY TRIGGER x BEFORE DELETE ON t BEGIN SELECT 1; END ; x", []string{"EXPLAIN CREATE TEMPORARY TRIGGER x BEFORE DELETE ON t BEGIN SELECT 1; END ;"}, " x"},
		{"CREATE TABLE trigger_log(x); CREATE TEMP TABLE t2(y);", []string{"CREATE TABLE trigger_log(x);", "CREATE TEMP TABLE t2(y);"}, ""},
		{"BEGIN; INSERT INTO t VALUES (1); END;", []string{"BEGIN;", "INSERT INTO t VALUES (1);", "END;"}, ""},
	}
	for _, c := range cases {
		stmts, rest := Statements(c.in)
		if !reflect.DeepEqual(stmts, c.stmts) || rest != c.rest {
			t.Errorf("Statements(%q) = %q, %q; want %q, %q", c.in, stmts, rest, c.stmts, c.rest)
		}
		if got, want := Complete(c.in), sqliteComplete(t, c.in); got != want {
			t.Errorf("Complete(%q) = %v, sqlite3_complete says %v", c.in, got, want)
		}
	}
	if got := Split(trigger); len(got) != 1 {
		t.Errorf("Split(trigger) = %q: a trigger with CASE ... END is one statement", got)
	}
}

// The splitter agrees with SQLite's sqlite3_complete on every prefix of
// random scripts built from the tokens its rules turn on.
func TestCompleteAgreesWithSQLite(t *testing.T) {
	parts := []string{";", " ", "\n", "\t", "CREATE", "create", "TRIGGER", "TEMP", "temporary", "END", "end", "EXPLAIN",
		"BEGIN", "CASE", "WHEN", "x", "1", "$a", "é", "_", "'a;b'", "'", `"q;"`, `"`, "`", "[x;]", "[", "]", "--c;\n", "-- c",
		"/* ; */", "/*", "*/", "-", "/", "(", ")", "ENDx", "TRIGGERS", "CREATED"}
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for n := 0; n < 3000; n++ {
		var b strings.Builder
		for k := r.IntN(14) + 1; k > 0; k-- {
			b.WriteString(parts[r.IntN(len(parts))])
			if r.IntN(3) == 0 {
				b.WriteByte(' ')
			}
		}
		s := b.String()
		for i := 1; i <= len(s); i++ {
			p := s[:i]
			if got, want := Complete(p), sqliteComplete(t, p); got != want {
				t.Fatalf("Complete(%q) = %v, sqlite3_complete says %v", p, got, want)
			}
			checked++
		}
		// Every statement Statements cuts is complete for SQLite, and what it
		// leaves unfinished is not.
		stmts, rest := Statements(s)
		for _, st := range stmts {
			if !sqliteComplete(t, st) {
				t.Fatalf("Statements(%q) cut %q, which sqlite3_complete calls incomplete", s, st)
			}
		}
		if rest != "" && sqliteComplete(t, s) {
			t.Fatalf("Statements(%q) left %q unfinished, but sqlite3_complete calls the script complete", s, rest)
		}
	}
	t.Logf("%d prefixes judged as sqlite3_complete judges them", checked)
}

func FuzzComplete(f *testing.F) {
	f.Add(trigger)
	f.Add("SELECT 'a;b'; /* x */ -- y\n;")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			return // SQLite reads a C string: it stops at a NUL (the server refuses those)
		}
		if got, want := Complete(s), sqliteComplete(t, s); got != want {
			t.Fatalf("Complete(%q) = %v, sqlite3_complete says %v", s, got, want)
		}
	})
}
