package jsonapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/sluicedb/sluice/internal/jsonscan"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// The common request is tiny, {"sql": "...", "params": [...]}, and decoding
// it with encoding/json (a Decoder, reflection, a second Decoder for the
// params, every value boxed) cost more CPU than executing it. decodeSimple
// parses exactly that shape by hand; anything else (\\u escapes, non-ASCII,
// floats, objects, a batch, unknown or repeated keys, malformed input) falls
// back to the general decoder, so both paths accept and reject the same
// bodies with the same results.

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readQuery reads the body and decodes it (one statement, or a batch).
func readQuery(body io.Reader) ([]sqlconn.Stmt, error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, bodyError(err)
	}
	if st, ok := decodeSimple(buf.Bytes()); ok {
		return scriptStatements(st)
	}
	return decodeQuery(bytes.NewReader(buf.Bytes()))
}

// bodyError is the answer to a body that could not be read.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return dberr.New(dberr.CodeTooLarge, fmt.Sprintf("request body is over the server's limit of %d bytes (limits.max-body-bytes)", mbe.Limit))
	}
	return badRequest("malformed JSON request: " + err.Error() + `; send {"sql": "...", "params": [...]} or {"batch": [...]}`)
}

// decodeSimple parses {"sql": STRING, "params": [SCALAR, ...] | null} with
// "params" optional and the keys in any order. ok is false for anything it
// does not handle.
func decodeSimple(b []byte) (st sqlconn.Stmt, ok bool) {
	p := scanner{jsonscan.Scanner{B: b}}
	if !p.Consume('{') {
		return st, false
	}
	var haveSQL, haveParams bool
	for first := true; ; first = false {
		if p.Consume('}') {
			if first {
				return st, false
			}
			break
		}
		if !first && !p.Consume(',') {
			return st, false
		}
		key, ok := p.str()
		if !ok || !p.Consume(':') {
			return st, false
		}
		switch {
		case string(key) == "sql" && !haveSQL:
			s, ok := p.str()
			if !ok || len(s) == 0 {
				return st, false
			}
			st.SQL, haveSQL = string(s), true
		case string(key) == "params" && !haveParams:
			haveParams = true
			if p.Literal("null") {
				continue
			}
			args, ok := p.scalars()
			if !ok {
				return st, false
			}
			st.Args = args
		default:
			return st, false
		}
	}
	if !haveSQL || !p.End() {
		return st, false
	}
	st.WantRows = true
	return st, true
}

// scanner adds the JSON API's values to jsonscan's primitives.
type scanner struct {
	jsonscan.Scanner
}

// str reads a string of ASCII (jsonscan.Scanner.String refuses the rest of
// what the general decoder would rewrite). The result may alias the body.
func (p *scanner) str() ([]byte, bool) {
	v, ascii, ok := p.String()
	return v, ok && ascii
}

// scalars reads an array of strings, integers, booleans and nulls.
func (p *scanner) scalars() ([]sqlconn.Value, bool) {
	if !p.Consume('[') {
		return nil, false
	}
	vals := []sqlconn.Value{}
	if p.Consume(']') {
		return vals, true
	}
	for {
		v, ok := p.scalar()
		if !ok {
			return nil, false
		}
		vals = append(vals, v)
		if p.Consume(']') {
			return vals, true
		}
		if !p.Consume(',') {
			return nil, false
		}
	}
}

func (p *scanner) scalar() (sqlconn.Value, bool) {
	p.Space()
	if p.I >= len(p.B) {
		return sqlconn.Value{}, false
	}
	switch c := p.B[p.I]; {
	case c == '"':
		s, ok := p.str()
		return sqlconn.Value{Type: sqlconn.Text, Text: string(s)}, ok
	case c == 't' && p.Literal("true"):
		return sqlconn.Value{Type: sqlconn.Integer, Int: 1}, true
	case c == 'f' && p.Literal("false"):
		return sqlconn.Value{Type: sqlconn.Integer}, true
	case c == 'n' && p.Literal("null"):
		return sqlconn.Value{Type: sqlconn.Null}, true
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	}
	return sqlconn.Value{}, false
}

// integer reads -?(0|[1-9][0-9]*) that fits in int64; fractions, exponents
// and larger numbers go to the general decoder.
func (p *scanner) integer() (sqlconn.Value, bool) {
	start := p.I
	if p.B[p.I] == '-' {
		p.I++
	}
	digits := p.I
	for p.I < len(p.B) && p.B[p.I] >= '0' && p.B[p.I] <= '9' {
		p.I++
	}
	n := p.I - digits
	if n == 0 || n > 18 || (n > 1 && p.B[digits] == '0') {
		return sqlconn.Value{}, false
	}
	if p.I < len(p.B) {
		switch p.B[p.I] {
		case '.', 'e', 'E':
			return sqlconn.Value{}, false
		}
	}
	i, err := strconv.ParseInt(string(p.B[start:p.I]), 10, 64)
	return sqlconn.Value{Type: sqlconn.Integer, Int: i}, err == nil
}
