package sqltext

import (
	"reflect"
	"testing"
)

func TestClassifyAndSplit(t *testing.T) {
	for sql, want := range map[string]TxRole{
		"BEGIN":                          {Kind: Begin},
		"  /* c */ begin immediate":      {Kind: Begin},
		"BEGIN TRANSACTION READONLY":     {Kind: Begin, ReadOnlyBegin: true},
		"-- x\nCOMMIT":                   {Kind: Commit},
		"end transaction":                {Kind: Commit},
		"ROLLBACK":                       {Kind: Rollback},
		"ROLLBACK TRANSACTION TO sp":     {Kind: Savepoint},
		"rollback to sp":                 {Kind: Savepoint},
		"SAVEPOINT a":                    {Kind: Savepoint},
		"RELEASE a":                      {Kind: Savepoint},
		"SELECT 'BEGIN'":                 {Kind: Plain},
		"INSERT INTO begin_t VALUES (1)": {Kind: Plain},
	} {
		if got := Classify(sql); got != want {
			t.Errorf("Classify(%q) = %+v, want %+v", sql, got, want)
		}
	}
	script := "CREATE TABLE a(x); INSERT INTO a VALUES ('a;b'); -- c;\n" +
		"CREATE TRIGGER tr AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1); DELETE FROM a; END; " +
		"SELECT \"q;\" , [x;y]; ; /* ; */"
	got := Split(script)
	want := []string{"CREATE TABLE a(x)", "INSERT INTO a VALUES ('a;b')",
		"-- c;\nCREATE TRIGGER tr AFTER INSERT ON a BEGIN INSERT INTO a VALUES (1); DELETE FROM a; END",
		"SELECT \"q;\" , [x;y]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("split:\n got %q\nwant %q", got, want)
	}
}

func TestBlankAndFirstKeyword(t *testing.T) {
	for _, sql := range []string{"", " ", ";", "-- x", "/* c */", " ; -- a\n/* b */ ;", "/* unterminated"} {
		if !IsBlank(sql) || FirstKeyword(sql) != "" {
			t.Errorf("%q: want blank", sql)
		}
	}
	for sql, want := range map[string]string{"select 1": "SELECT", "-- c\n pragma x": "PRAGMA", "; VALUES (1)": "", "(SELECT 1)": ""} {
		if IsBlank(sql) {
			t.Errorf("%q: not blank", sql)
		}
		if got := FirstKeyword(sql); got != want {
			t.Errorf("FirstKeyword(%q) = %q, want %q", sql, got, want)
		}
	}
}
