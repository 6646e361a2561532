package jsonapi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// The hand-written decoder must agree with the general one on every body it
// accepts, and leave every other body to it.
func TestDecodeSimpleAgreesWithGeneralDecoder(t *testing.T) {
	fast := []string{
		`{"sql":"INSERT INTO t (json) VALUES (?)","params":["{'age':10, 'name':'yamada'}"]}`,
		` { "params" : [ 1 , -2 , 0 , true , false , null , "a b" ] , "sql" : "SELECT ?, ?, ?, ?, ?, ?, ?" } `,
		`{"sql":"SELECT 1"}`,
		`{"sql":"INSERT INTO t (json) VALUES (?)","params":["{\"age\":10, \"name\":\"yamada\", \"class\":\"A\"}"]}`,
		`{"sql":"SELECT ?","params":["a\\b\/c\bd\fe\nf\rg\th\"\""]}`,
		`{"sql":"SELECT \"x\"","params":["\n"]}`,
		`{"sql":"SELECT 1","params":null}`,
		`{"sql":"SELECT 1","params":[]}`,
		`{"sql":"SELECT ?","params":[123456789012345678, -123456789012345678]}`,
		"{\"sql\":\"SELECT 1\"}\n",
	}
	for _, body := range fast {
		got, ok := decodeSimple([]byte(body))
		if !ok {
			t.Errorf("decodeSimple(%s) fell back; it should handle it", body)
			continue
		}
		want, err := decodeQuery(bytes.NewReader([]byte(body)))
		if err != nil || len(want) != 1 {
			t.Fatalf("general decoder on %s: %v %v", body, want, err)
		}
		if !reflect.DeepEqual(got, want[0]) {
			t.Errorf("%s:\n fast    %+v\n general %+v", body, got, want[0])
		}
	}
	fallBack := []string{
		`{"sql":"SELECT ?","params":["caf\u00e9"]}`, // \u escape
		`{"sql":"SELECT ?","params":["a\x"]}`,       // invalid escape
		`{"sql":"SELECT ?","params":["a\`,           // cut in an escape
		`{"sql":"SELECT ?","params":["café"]}`,      // non-ASCII
		`{"sql":"SELECT ?","params":[1.5]}`,
		`{"sql":"SELECT ?","params":[1e3]}`,
		`{"sql":"SELECT ?","params":[01]}`,
		`{"sql":"SELECT ?","params":[12345678901234567890]}`,
		`{"sql":"SELECT ?","params":[{"base64":"AAE="}]}`,
		`{"sql":"SELECT :a","params":{"a":1}}`,
		`{"sql":"SELECT 1","sql":"SELECT 2"}`, // refused: ambiguous
		`{"SQL":"SELECT 1"}`,                  // refused: ambiguous
		`{"sql":"SELECT 1","extra":1}`,
		`{"sql":""}`,
		`{"sql":null}`,
		`{"batch":[{"sql":"SELECT 1"}]}`,
		`{"sql":"SELECT 1"} {}`,
		`{"sql":"SELECT 1",}`,
		`{"sql":"SELECT 1"`,
		`{}`,
		``,
		`[1]`,
		`{"sql":"SELECT ?","params":[tru]}`,
		`{"sql":"SELECT ?","params":[1,]}`,
		`{"sql":"SELECT ?","params":[-]}`,
	}
	for _, body := range fallBack {
		if st, ok := decodeSimple([]byte(body)); ok {
			t.Errorf("decodeSimple(%s) = %+v; it should leave it to the general decoder", body, st)
		}
	}
	// And the fallback gives the general decoder's answer.
	for _, body := range fallBack {
		got, gotErr := readQuery(bytes.NewReader([]byte(body)))
		want, wantErr := decodeQuery(bytes.NewReader([]byte(body)))
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Errorf("readQuery(%s) = %v, %v; general decoder %v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

// Deep nesting is left to the general decoder, which refuses it, without
// the key check recursing into it.
func TestDeepNestingIsRefusedWithoutRecursingIntoIt(t *testing.T) {
	body := `{"sql":"SELECT ?","params":` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}`
	if _, err := readQuery(strings.NewReader(body)); err == nil {
		t.Fatal("a million nested arrays were accepted")
	}
}
