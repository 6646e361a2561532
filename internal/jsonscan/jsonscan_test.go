package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// Whatever String accepts, encoding/json reads as the same string.
func TestStringAgreesWithEncodingJSON(t *testing.T) {
	inputs := []string{
		`""`, `"plain"`, ` "after space"`, `"héllo wörld ✓"`, `"a \"quoted\" word"`, `"tab\tnew\nline\r\\ \/ \b\f"`,
		`"\u0041"`, `"bad \x escape"`, "\"raw\ttab\"", "\"\xff invalid\"", "\"\xc3\\n split\"", `"unterminated`, `"ends in \`, `x"not a string"`,
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab \"\\/bfnrtu0\t\xc3\xa9\xe2\x9c\x93\xff")
	for range 20000 {
		b := []byte{'"'}
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		inputs = append(inputs, string(append(b, '"')))
	}
	accepted := 0
	for _, in := range inputs {
		s := Scanner{B: []byte(in)}
		v, ascii, ok := s.String()
		if !ok || !s.End() { // compare whole inputs that are one string
			continue
		}
		accepted++
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("String read %q from %q; encoding/json refuses it: %v", v, in, err)
		}
		if string(v) != want {
			t.Fatalf("String read %q from %q; encoding/json reads %q", v, in, want)
		}
		isASCII := true
		for _, c := range []byte(want) {
			isASCII = isASCII && c < 0x80
		}
		if ascii != isASCII {
			t.Fatalf("%q: ascii %v, want %v", in, ascii, isASCII)
		}
	}
	if accepted < 1000 {
		t.Fatalf("String accepted %d of %d inputs; the comparison exercised too little", accepted, len(inputs))
	}
	for _, in := range []string{`"\u0041"`, "\"raw\ttab\"", "\"\xff invalid\"", "\"\xc3\\n split\"", `"unterminated`, `"ends in \`} {
		s := Scanner{B: []byte(in)}
		if _, _, ok := s.String(); ok {
			t.Errorf("String accepted %q", in)
		}
	}
}

func TestPunctuationAndLiterals(t *testing.T) {
	s := Scanner{B: []byte(" {\n\t\"k\" : null , true ]\r ")}
	if !s.Consume('{') || s.Consume('}') {
		t.Fatal("Consume")
	}
	if k, _, ok := s.String(); !ok || string(k) != "k" {
		t.Fatal("key")
	}
	if !s.Consume(':') || s.Literal("true") || !s.Literal("null") || !s.Consume(',') || !s.Literal("true") {
		t.Fatal("literals")
	}
	if s.End() || s.Peek() != ']' || !s.Consume(']') || !s.End() || s.Peek() != 0 || s.Consume(0) {
		t.Fatal("end")
	}
}
