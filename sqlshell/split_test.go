package sqlshell

import (
	"reflect"
	"testing"
)

func TestSplitStatements(t *testing.T) {
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
		{";;  ;", nil, ""},
		{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = CASE WHEN 1 THEN 2 END; DELETE FROM u; END; SELECT 1;",
			[]string{"CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = CASE WHEN 1 THEN 2 END; DELETE FROM u; END;", "SELECT 1;"}, ""},
		{"create temp trigger tr after insert on t begin\n select 1;\n", nil, "create temp trigger tr after insert on t begin\n select 1;\n"},
		{"BEGIN; INSERT INTO t VALUES (1); END;", []string{"BEGIN;", "INSERT INTO t VALUES (1);", "END;"}, ""},
	}
	for _, c := range cases {
		stmts, rest := splitStatements(c.in)
		if !reflect.DeepEqual(stmts, c.stmts) || rest != c.rest {
			t.Errorf("splitStatements(%q) = %q, %q; want %q, %q", c.in, stmts, rest, c.stmts, c.rest)
		}
	}
}
