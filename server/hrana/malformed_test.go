package hrana_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// malformedClass is a statement a client may send by mistake, with what a
// local SQLite file answers: "" for an empty result, else part of the error.
// hranaErr, when set, is what the Hrana protocol answers instead, in sqld's
// wording (one statement per Stmt; arguments counted against parameters).
type malformedClass struct {
	name, sql string
	args      []any
	wantErr   string
	hranaErr  string
}

var malformedClasses = []malformedClass{
	{"line comment", "-- x", nil, "", ""},
	{"block comment", "/* c */", nil, "", ""},
	{"semicolon", ";", nil, "", ""},
	{"whitespace", " \n\t ", nil, "", ""},
	{"empty", "", nil, "", ""},
	{"syntax error", "SELEC 1", nil, "syntax error", ""},
	{"unknown table", "SELECT * FROM nope", nil, "no such table: nope", ""},
	{"several statements, the last wrong", "SELECT 1; SELEC 2", nil, "syntax error", "more than one statement"},
	{"huge expression", "SELECT " + strings.Repeat("1+", 300000) + "1", nil, "too large", ""},
	{"invalid UTF-8", "SELECT '\xff\xfe'", nil, "", ""},
	{"NUL character", "SELECT 1\x00; DROP TABLE t", nil, "NUL", ""},
	{"too many arguments", "SELECT ?", []any{1, 2}, "2 arguments", "expected 1 found 2"},
	{"arguments for no statement", "-- x", []any{1}, "1 arguments", "expected 0 found 1"},
}

// checkAnswer checks a Hrana result against what SQLite answers.
func (m malformedClass) checkAnswer(t *testing.T, r map[string]any) {
	t.Helper()
	want := m.wantErr
	if m.hranaErr != "" {
		want = m.hranaErr
	}
	if want == "" {
		res := okResult(t, m.name, r)
		if m.name != "invalid UTF-8" && len(res["rows"].([]any)) != 0 {
			t.Errorf("%s: rows %v, want none", m.name, res["rows"])
		}
		return
	}
	if r["type"] != "error" {
		t.Fatalf("%s: want an error containing %q, got %v", m.name, want, r)
	}
	e := r["error"].(map[string]any)
	if msg, _ := e["message"].(string); !strings.Contains(msg, want) || strings.Contains(fmt.Sprint(e["code"]), "INTERNAL") {
		t.Errorf("%s: error %v, want one containing %q", m.name, e, want)
	}
}

// Every class of malformed statement, sent inside an open transaction
// (Hrana execute, batch and sequence; JSON API batches), answers as SQLite
// does, leaves the transaction usable, and once the client ends it another
// client writes at once: nothing panics, nothing keeps the write lock. The
// same statements from a read-only token leave the read connections working.
func TestMalformedStatementsReleaseTheWriter(t *testing.T) {
	base := semServer(t, "m")
	okResult(t, "create", func() map[string]any {
		_, res := hranaPipe(t, base, "m", rwToken, nil, hexec("CREATE TABLE t (x)"), hclose)
		return res[0]
	}())
	writeWithinASecond := func(what string) {
		t.Helper()
		status, out := jsonQuery(t, base, "m", rwToken, map[string]any{"sql": "INSERT INTO t VALUES (0)"}, time.Second)
		if status != http.StatusOK {
			t.Fatalf("after %s: another client's write: HTTP %d %v", what, status, out)
		}
	}
	for _, m := range malformedClasses {
		bad := hexec(m.sql, m.args...)

		// Hrana: BEGIN and a write, then the statement, in an interactive transaction.
		baton, res := hranaPipe(t, base, "m", rwToken, nil, hexec("BEGIN"), hexec("INSERT INTO t VALUES (1)"), bad)
		okResult(t, m.name+": begin", res[0])
		okResult(t, m.name+": insert", res[1])
		m.checkAnswer(t, res[2])
		if baton == nil {
			t.Fatalf("%s: the stream was closed by the statement", m.name)
		}
		baton, res = hranaPipe(t, base, "m", rwToken, baton, map[string]any{"type": "get_autocommit"}, hexec("INSERT INTO t VALUES (2)"))
		if okResult(t, m.name+": get_autocommit", res[0])["is_autocommit"] != false {
			t.Fatalf("%s: the transaction ended: %v", m.name, res[0])
		}
		okResult(t, m.name+": insert after it", res[1])
		hranaPipe(t, base, "m", rwToken, baton, hclose)
		writeWithinASecond(m.name + " inside a Hrana transaction")

		// Hrana: the same as one batch, and as a sequence.
		_, res = hranaPipe(t, base, "m", rwToken, nil, map[string]any{"type": "batch", "batch": map[string]any{"steps": []any{
			map[string]any{"stmt": hexec("BEGIN")["stmt"]}, map[string]any{"stmt": hexec("INSERT INTO t VALUES (3)")["stmt"]},
			map[string]any{"stmt": bad["stmt"]}}}}, hclose)
		okResult(t, m.name+": batch", res[0])
		if !strings.Contains(m.sql, "\x00") {
			hranaPipe(t, base, "m", rwToken, nil, map[string]any{"type": "sequence", "sql": "BEGIN; INSERT INTO t VALUES (4); " + m.sql}, hclose)
		}
		writeWithinASecond(m.name + " in a Hrana batch")

		// JSON API: in a batch (one transaction) and alone.
		stmt := map[string]any{"sql": m.sql}
		if m.args != nil {
			stmt["params"] = m.args
		}
		status, out := jsonQuery(t, base, "m", rwToken, map[string]any{"batch": []any{map[string]any{"sql": "INSERT INTO t VALUES (5)"}, stmt}}, 30*time.Second)
		if (status == http.StatusOK) != (m.wantErr == "") || status >= 500 {
			t.Errorf("%s: JSON API batch: HTTP %d %v", m.name, status, out)
		}
		status, out = jsonQuery(t, base, "m", rwToken, stmt, 30*time.Second)
		if (status == http.StatusOK) != (m.wantErr == "") || status >= 500 {
			t.Errorf("%s: JSON API: HTTP %d %v", m.name, status, out)
		}
		writeWithinASecond(m.name + " through the JSON API")

		// A read-only token, in a read transaction and on the pooled read
		// connections (more times than there are of them).
		baton, res = hranaPipe(t, base, "m", roToken, nil, hexec("BEGIN"), hexec("SELECT count(*) FROM t"), bad)
		okResult(t, m.name+": read-only begin", res[0])
		m.checkAnswer(t, res[2])
		hranaPipe(t, base, "m", roToken, baton, hclose)
		for range 6 {
			_, res = hranaPipe(t, base, "m", roToken, nil, bad, hexec("SELECT count(*) FROM t"), hclose)
			m.checkAnswer(t, res[0])
			okResult(t, m.name+": read after it", res[1])
			if status, out := jsonQuery(t, base, "m", roToken, stmt, 30*time.Second); status >= 500 {
				t.Fatalf("%s: read-only JSON API: HTTP %d %v", m.name, status, out)
			}
		}
		writeWithinASecond(m.name + " from a read-only token")
	}
	// Only what was committed is there: the rows of the other clients.
	if n := scalar(t, base, "m", "SELECT count(*) FROM t WHERE x <> 0"); fmt.Sprint(n) != fmt.Sprint(countCommittedByClasses()) {
		t.Fatalf("rows written inside transactions the clients rolled back or that failed: %v, want %d", n, countCommittedByClasses())
	}
}

// countCommittedByClasses is the number of rows the test's own statements
// commit: the JSON API batch (one row) for each class that is not an error.
func countCommittedByClasses() int {
	n := 0
	for _, m := range malformedClasses {
		if m.wantErr == "" {
			n++
		}
	}
	return n
}
