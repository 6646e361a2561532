// Package jsonscan holds the primitives of sluice's hand-written decoders for
// the request bodies clients send most (the JSON API's statement, Hrana's
// pipeline): white space, punctuation, literals and strings. Each decoder
// reads only shapes it knows encoding/json reads the same way and hands
// everything else to encoding/json, so these primitives refuse rather than
// guess: a \u escape, a control byte or invalid UTF-8 in a string ends the
// fast path.
package jsonscan

import "unicode/utf8"

// Scanner reads B from I on. Decoders read their own tokens (numbers) from
// B and I directly.
type Scanner struct {
	B []byte
	I int
}

// Space skips JSON white space.
func (s *Scanner) Space() {
	for s.I < len(s.B) {
		switch s.B[s.I] {
		case ' ', '\t', '\n', '\r':
			s.I++
		default:
			return
		}
	}
}

// Peek skips white space and returns the next byte, 0 at the end.
func (s *Scanner) Peek() byte {
	s.Space()
	if s.I < len(s.B) {
		return s.B[s.I]
	}
	return 0
}

// Consume skips white space and then c, if c is next.
func (s *Scanner) Consume(c byte) bool {
	if s.Peek() != c || s.I >= len(s.B) {
		return false
	}
	s.I++
	return true
}

// Literal skips white space and then word (null, true, false), if it is next.
func (s *Scanner) Literal(word string) bool {
	s.Space()
	if len(s.B)-s.I < len(word) || string(s.B[s.I:s.I+len(word)]) != word {
		return false
	}
	s.I += len(word)
	return true
}

// End reports whether only white space is left.
func (s *Scanner) End() bool {
	s.Space()
	return s.I == len(s.B)
}

// String reads a string after optional white space. Of the escapes it
// decodes the one-character ones (\" \\ \/ \b \f \n \r \t); a \u escape, a
// control byte or invalid UTF-8 refuses the string (encoding/json would
// decode or replace them). ascii reports whether every byte was ASCII. The
// result may alias B.
func (s *Scanner) String() (v []byte, ascii, ok bool) {
	if !s.Consume('"') {
		return nil, false, false
	}
	start := s.I
	ascii = true
	var out []byte // the decoded string, once an escape was seen
	for ; s.I < len(s.B); s.I++ {
		switch c := s.B[s.I]; {
		case c == '"':
			v = s.B[start:s.I]
			s.I++
			if out != nil {
				v = append(out, v...)
			}
			if !ascii && !utf8.Valid(v) {
				return nil, false, false
			}
			return v, ascii, true
		case c == '\\':
			if s.I+1 >= len(s.B) {
				return nil, false, false
			}
			e, ok := shortEscape(s.B[s.I+1])
			if !ok {
				return nil, false, false
			}
			if out == nil {
				out = make([]byte, 0, len(s.B)-start)
			}
			out = append(append(out, s.B[start:s.I]...), e)
			s.I++
			start = s.I + 1
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, false
}

// shortEscape decodes the character after a backslash, for the escapes that
// stand for one byte.
func shortEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}
