package jsonapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

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
		return []sqlconn.Stmt{st}, nil
	}
	return decodeQuery(bytes.NewReader(buf.Bytes()))
}

// bodyError is the answer to a body that could not be read.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return dberr.New(dberr.CodeTooLarge, fmt.Sprintf("request body is over the server's limit of %d bytes", mbe.Limit))
	}
	return badRequest("malformed JSON request: " + err.Error() + `; send {"sql": "...", "params": [...]} or {"batch": [...]}`)
}

// decodeSimple parses {"sql": STRING, "params": [SCALAR, ...] | null} with
// "params" optional and the keys in any order. ok is false for anything it
// does not handle.
func decodeSimple(b []byte) (st sqlconn.Stmt, ok bool) {
	p := scanner{b: b}
	if !p.skip('{') {
		return st, false
	}
	var haveSQL, haveParams bool
	for first := true; ; first = false {
		if p.skip('}') {
			if first {
				return st, false
			}
			break
		}
		if !first && !p.skip(',') {
			return st, false
		}
		key, ok := p.str()
		if !ok || !p.skip(':') {
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
			if p.literal("null") {
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
	p.ws()
	if !haveSQL || p.i != len(p.b) {
		return st, false
	}
	st.WantRows = true
	return st, true
}

type scanner struct {
	b []byte
	i int
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// skip consumes c after optional whitespace.
func (p *scanner) skip(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *scanner) literal(s string) bool {
	p.ws()
	if bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.i += len(s)
		return true
	}
	return false
}

// str reads a string of printable ASCII; of the escapes only the
// one-character ones (\" \\ \/ \b \f \n \r \t). The result may alias p.b.
func (p *scanner) str() ([]byte, bool) {
	if !p.skip('"') {
		return nil, false
	}
	start := p.i
	var out []byte // the unescaped string, once an escape was seen
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if out != nil {
				return append(out, s...), true
			}
			return s, true
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return nil, false
			}
			var e byte
			switch p.b[p.i+1] {
			case '"', '\\', '/':
				e = p.b[p.i+1]
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			default: // \uXXXX and invalid escapes
				return nil, false
			}
			if out == nil {
				out = make([]byte, 0, len(p.b)-start)
			}
			out = append(append(out, p.b[start:p.i]...), e)
			p.i++
			start = p.i + 1
		case c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// scalars reads an array of strings, integers, booleans and nulls.
func (p *scanner) scalars() ([]sqlconn.Value, bool) {
	if !p.skip('[') {
		return nil, false
	}
	vals := []sqlconn.Value{}
	if p.skip(']') {
		return vals, true
	}
	for {
		v, ok := p.scalar()
		if !ok {
			return nil, false
		}
		vals = append(vals, v)
		if p.skip(']') {
			return vals, true
		}
		if !p.skip(',') {
			return nil, false
		}
	}
}

func (p *scanner) scalar() (sqlconn.Value, bool) {
	p.ws()
	if p.i >= len(p.b) {
		return sqlconn.Value{}, false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		s, ok := p.str()
		return sqlconn.Value{Type: sqlconn.Text, Text: string(s)}, ok
	case c == 't' && p.literal("true"):
		return sqlconn.Value{Type: sqlconn.Integer, Int: 1}, true
	case c == 'f' && p.literal("false"):
		return sqlconn.Value{Type: sqlconn.Integer}, true
	case c == 'n' && p.literal("null"):
		return sqlconn.Value{Type: sqlconn.Null}, true
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	}
	return sqlconn.Value{}, false
}

// integer reads -?(0|[1-9][0-9]*) that fits in int64; fractions, exponents
// and larger numbers go to the general decoder.
func (p *scanner) integer() (sqlconn.Value, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 18 || (n > 1 && p.b[digits] == '0') {
		return sqlconn.Value{}, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return sqlconn.Value{}, false
		}
	}
	i, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return sqlconn.Value{Type: sqlconn.Integer, Int: i}, err == nil
}
