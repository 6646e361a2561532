package proto

import (
	"encoding/json"
	"strconv"

	"github.com/sluicedb/sluice/internal/jsonscan"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// DecodePipelineRequest decodes a pipeline request body exactly as
// json.Unmarshal does. The shape libSQL's clients send for statements (execute
// and close requests; text, integer and null arguments; strings without \u
// escapes) is read by a small scanner, several times cheaper than reflection
// on a read that returns little; anything else (a batch, a \u escape, an
// unknown or repeated key, a malformed body) goes to encoding/json, which also
// words every error. The scanner never accepts what encoding/json would decode
// differently: a test compares the two on generated and mutated bodies.
func DecodePipelineRequest(data []byte, into *PipelineRequest) error {
	_, err := DecodePipelineRequestAtMost(data, into, 0)
	return err
}

// DecodePipelineRequestAtMost is DecodePipelineRequest that gives up as soon
// as the scanner has read more than max requests (max > 0), reporting
// tooMany: a body of a hundred thousand tiny statements bound to be refused
// is not turned into a hundred thousand structures first. A body the
// scanner does not read is decoded whole (the caller counts).
func DecodePipelineRequestAtMost(data []byte, into *PipelineRequest, max int) (tooMany bool, err error) {
	var fast PipelineRequest
	s := &pipelineScanner{Scanner: jsonscan.Scanner{B: data}, max: max}
	if s.request(&fast) {
		*into = fast
		return false, nil
	}
	if s.tooMany {
		return true, nil
	}
	return false, json.Unmarshal(data, into)
}

// pipelineScanner reads one body; every method returns false as soon as the
// input leaves the shape it knows, and the caller falls back.
type pipelineScanner struct {
	jsonscan.Scanner
	max, n  int  // requests allowed (0: any) and read
	tooMany bool // stopped at more than max requests
}

// countedRequest reads one request of "requests", stopping past max.
func (s *pipelineScanner) countedRequest(r *StreamRequest) bool {
	if s.n++; s.max > 0 && s.n > s.max {
		s.tooMany = true
		return false
	}
	return s.streamRequest(r)
}

// str reads a string (see jsonscan.Scanner.String for what it refuses).
func (s *pipelineScanner) str() (string, bool) {
	v, _, ok := s.String()
	return string(v), ok
}

// object reads {"key": value, ...}, calling field for each key, which must
// read the value. A repeated key sends the body to encoding/json.
func (s *pipelineScanner) object(field func(key string) bool) bool {
	if !s.Consume('{') {
		return false
	}
	if s.Consume('}') {
		return true
	}
	var seen []string
	for {
		key, ok := s.str()
		if !ok || !s.Consume(':') {
			return false
		}
		for _, k := range seen {
			if k == key {
				return false
			}
		}
		seen = append(seen, key)
		if !field(key) {
			return false
		}
		if s.Consume(',') {
			continue
		}
		return s.Consume('}')
	}
}

// scanArray reads [elem, ...] into *into, or null (leaving it nil); a
// non-null array is never nil, as encoding/json decodes it.
func scanArray[T any](s *pipelineScanner, into *[]T, elem func(*T) bool) bool {
	if s.Peek() == 'n' {
		return s.Literal("null")
	}
	if !s.Consume('[') {
		return false
	}
	out := []T{}
	if !s.Consume(']') {
		for {
			out = append(out, *new(T))
			if !elem(&out[len(out)-1]) {
				return false
			}
			if s.Consume(',') {
				continue
			}
			if !s.Consume(']') {
				return false
			}
			break
		}
	}
	*into = out
	return true
}

// optString reads a string or null into a *string.
func (s *pipelineScanner) optString(into **string) bool {
	if s.Peek() == 'n' {
		*into = nil
		return s.Literal("null")
	}
	v, ok := s.str()
	*into = &v
	return ok
}

func (s *pipelineScanner) request(p *PipelineRequest) bool {
	ok := s.object(func(key string) bool {
		switch key {
		case "baton":
			return s.optString(&p.Baton)
		case "requests":
			return scanArray(s, &p.Requests, s.countedRequest)
		}
		return false
	})
	return ok && s.End()
}

func (s *pipelineScanner) streamRequest(r *StreamRequest) bool {
	return s.object(func(key string) bool {
		switch key {
		case "type":
			v, ok := s.str()
			r.Type = v
			return ok
		case "stmt":
			if s.Peek() == 'n' {
				r.Stmt = nil
				return s.Literal("null")
			}
			r.Stmt = &Stmt{}
			return s.stmt(r.Stmt)
		case "sql":
			return s.optString(&r.SQL)
		}
		return false
	})
}

func (s *pipelineScanner) stmt(st *Stmt) bool {
	return s.object(func(key string) bool {
		switch key {
		case "sql":
			return s.optString(&st.SQL)
		case "args":
			return scanArray(s, &st.Args, s.value)
		case "named_args":
			return scanArray(s, &st.NamedArgs, s.namedArg)
		case "want_rows":
			switch s.Peek() {
			case 'n':
				st.WantRows = nil
				return s.Literal("null")
			case 't':
				v := true
				st.WantRows = &v
				return s.Literal("true")
			case 'f':
				v := false
				st.WantRows = &v
				return s.Literal("false")
			}
		}
		return false
	})
}

func (s *pipelineScanner) namedArg(a *NamedArg) bool {
	return s.object(func(key string) bool {
		switch key {
		case "name":
			v, ok := s.str()
			a.Name = v
			return ok
		case "value":
			return s.value(&a.Value)
		}
		return false
	})
}

// value reads a null, text or integer argument whose "type" comes before
// its "value" (as every client writes it); floats and blobs go to
// encoding/json.
func (s *pipelineScanner) value(v *Value) bool {
	typ := ""
	hasValue := false
	ok := s.object(func(key string) bool {
		switch key {
		case "type":
			t, ok := s.str()
			typ = t
			return ok
		case "value":
			hasValue = true
			switch typ {
			case "text":
				t, ok := s.str()
				*v = Value{Type: sqlconn.Text, Text: t}
				return ok
			case "integer":
				n, ok := s.integer()
				*v = Value{Type: sqlconn.Integer, Int: n}
				return ok
			}
		}
		return false
	})
	switch {
	case !ok:
		return false
	case typ == "null" && !hasValue:
		*v = Value{Type: sqlconn.Null}
		return true
	}
	return hasValue
}

// integer reads a 64-bit integer written as a string of digits ("42", as
// Hrana specifies) or as a bare JSON integer.
func (s *pipelineScanner) integer() (int64, bool) {
	quoted := s.Peek() == '"'
	if quoted {
		s.I++
	}
	start := s.I
	if s.I < len(s.B) && s.B[s.I] == '-' {
		s.I++
	}
	digits := s.I
	for s.I < len(s.B) && s.B[s.I] >= '0' && s.B[s.I] <= '9' {
		s.I++
	}
	// JSON numbers have no leading zeros; strings of digits leave them to
	// encoding/json's path too, to keep one reading of "007".
	if s.I == digits || (s.B[digits] == '0' && s.I-digits > 1) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.B[start:s.I]), 10, 64)
	if err != nil {
		return 0, false
	}
	if quoted { // the closing quote right after the digits: " 42" and "42 " are not integers
		if s.I >= len(s.B) || s.B[s.I] != '"' {
			return 0, false
		}
		s.I++
	}
	return n, true
}
