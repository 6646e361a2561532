package hrana

import (
	"encoding/json"
	"testing"

	"github.com/sluicedb/sluice/server/sqlconn"
)

// Parameters are read as sqld reads them: an integer literal is an INTEGER
// (a u64 past i64 wraps, as sqld casts it), any other number a REAL, a
// boolean an INTEGER, {"base64"} a BLOB (padded or not).
func TestLegacyParametersAreTypedAsSqldTypesThem(t *testing.T) {
	cases := []struct {
		in   string
		want sqlconn.Value
	}{
		{`null`, sqlconn.Value{Type: sqlconn.Null}},
		{`true`, sqlconn.Value{Type: sqlconn.Integer, Int: 1}},
		{`false`, sqlconn.Value{Type: sqlconn.Integer}},
		{`42`, sqlconn.Value{Type: sqlconn.Integer, Int: 42}},
		{`-9223372036854775808`, sqlconn.Value{Type: sqlconn.Integer, Int: -1 << 63}},
		{`18446744073709551615`, sqlconn.Value{Type: sqlconn.Integer, Int: -1}},
		{`1.0`, sqlconn.Value{Type: sqlconn.Float, Float: 1}},
		{`1e3`, sqlconn.Value{Type: sqlconn.Float, Float: 1000}},
		{`"text"`, sqlconn.Value{Type: sqlconn.Text, Text: "text"}},
		{`{"base64": "aGk"}`, sqlconn.Value{Type: sqlconn.Blob, Blob: []byte("hi")}},
		{`{"base64": "aGk="}`, sqlconn.Value{Type: sqlconn.Blob, Blob: []byte("hi")}},
	}
	for _, c := range cases {
		got, err := legacyValue(json.RawMessage(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got.Type != c.want.Type || got.Int != c.want.Int || got.Float != c.want.Float || got.Text != c.want.Text || string(got.Blob) != string(c.want.Blob) {
			t.Errorf("%s: %+v, want %+v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"blob": "aGk"}`, `{"base64": "!!"}`, `{"base64": "aGk", "x": 1}`} {
		if _, err := legacyValue(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// What sqld refuses before running anything, and what it lets through.
func TestLegacyRequestsSqldRefuses(t *testing.T) {
	cases := []struct {
		body   string
		status int // 0: accepted
	}{
		{`{"statements": ["SELECT 1", {"q": "SELECT ?", "params": [1]}, {"q": "SELECT :a", "params": {":a": 1}}]}`, 0},
		{`{"statements": ["BEGIN", "INSERT INTO t VALUES (1)", "COMMIT"]}`, 0},
		{`{"statements": ["BEGIN", "SELECT 1", "ROLLBACK"]}`, 0},
		{`{"statements": []}`, 0},
		{`{"statements": ["BEGIN"]}`, 400},
		{`{"statements": ["SAVEPOINT a"]}`, 400},
		{`{"statements": ["SAVEPOINT a", "RELEASE a"]}`, 400},
		{`{"statements": ["SELECT 1; SELECT 2"]}`, 400},
		{`{"statements": [{"q": "SELECT 1", "sql": "x"}]}`, 422},
		{`{"statements": [{"params": []}]}`, 422},
		{`{"statements": "SELECT 1"}`, 422},
		{`{}`, 422},
		{`{"statements": [`, 400},
	}
	for _, c := range cases {
		_, status, msg := decodeLegacy([]byte(c.body))
		if status != c.status {
			t.Errorf("%s: status %d (%s), want %d", c.body, status, msg, c.status)
		}
	}
}
