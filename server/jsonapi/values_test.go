package jsonapi

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/server/sqlconn"
)

func TestValuesAreExact(t *testing.T) {
	stmts, err := decodeQuery(strings.NewReader(`{"sql":"x","params":[9223372036854775807, -9007199254740993, 1.0, 2e3, "s", true, null, {"base64":"AAH/"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := stmts[0].Args
	want := []sqlconn.Value{{Type: sqlconn.Integer, Int: math.MaxInt64}, {Type: sqlconn.Integer, Int: -9007199254740993},
		{Type: sqlconn.Float, Float: 1}, {Type: sqlconn.Float, Float: 2000}, {Type: sqlconn.Text, Text: "s"},
		{Type: sqlconn.Integer, Int: 1}, {Type: sqlconn.Null}, {Type: sqlconn.Blob, Blob: []byte{0, 1, 255}}}
	for i := range want {
		if got[i].Type != want[i].Type || got[i].Int != want[i].Int || got[i].Float != want[i].Float || got[i].Text != want[i].Text || string(got[i].Blob) != string(want[i].Blob) {
			t.Errorf("param %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	var b []byte
	for _, v := range want {
		b = appendValue(append(b, ','), v)
	}
	if s := string(b); s != `,9223372036854775807,-9007199254740993,1.0,2000.0,"s",1,null,{"base64":"AAH/"}` {
		t.Fatalf("encoded %s", s)
	}
	if !json.Valid([]byte("[" + string(b[1:]) + "]")) {
		t.Fatal("not valid JSON")
	}
	for _, bad := range []string{`{"sql":"x","params":[1e999999]}`, `{"sql":"x","params":[{"a":1}]}`, `{"sql":"x","params":"p"}`, `{"batch":[]}`, `{}`, `{"sql":"x"} {}`} {
		if _, err := decodeQuery(strings.NewReader(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
