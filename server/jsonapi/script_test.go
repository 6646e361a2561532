package jsonapi

import (
	"strings"
	"testing"
)

func TestAScriptIsAnsweredStatementByStatement(t *testing.T) {
	stmts, err := readQuery(strings.NewReader(`{"sql": "DELETE FROM n; SELECT 1"}`))
	if err != nil || len(stmts) != 2 || stmts[0].SQL != "DELETE FROM n" || stmts[1].SQL != "SELECT 1" || !stmts[1].WantRows {
		t.Fatalf("DELETE; SELECT: %+v, %v; want two statements", stmts, err)
	}
	trigger := "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET a = CASE WHEN new.b > 0 THEN 1 ELSE 0 END; END;"
	for _, body := range []string{`{"sql": "SELECT 1;; -- c\n"}`, `{"sql": "` + trigger + `"}`, `{"sql": "SELECT ';'", "params": []}`} {
		if stmts, err := readQuery(strings.NewReader(body)); err != nil || len(stmts) != 1 {
			t.Errorf("%s: %d statements, %v; want one", body, len(stmts), err)
		}
	}
	for body, want := range map[string]string{
		`{"sql": "INSERT INTO t VALUES (?); SELECT ?", "params": [1]}`:         `"sql" holds 2 statements and "params" bind to one`,
		`{"batch": [{"sql": "SELECT 1"}, {"sql": "DELETE FROM n; SELECT 1"}]}`: "batch statement 2 holds 2 statements",
	} {
		if _, err := readQuery(strings.NewReader(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want a 400 saying %q", body, err, want)
		}
	}
}
