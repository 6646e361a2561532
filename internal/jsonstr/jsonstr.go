// Package jsonstr appends JSON string literals to byte slices, escaping
// exactly as encoding/json does (quotes, backslashes, control characters,
// <, > and & as \u escapes, U+2028 and U+2029, invalid UTF-8 as U+FFFD), but
// without reflection or allocation: the servers' result encoders call it
// once per text value.
//
// It imports only the standard library.
package jsonstr

import "unicode/utf8"

const hex = "0123456789abcdef"

// safe[b] is true for the ASCII bytes that appear in a JSON string as they are.
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// Append appends s as a quoted JSON string.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most text needs no escape: skip it eight bytes at a time.
		for i+8 <= len(s) && plain8(le64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendBytes is Append for text held in a byte slice.
func AppendBytes(b []byte, s []byte) []byte {
	// Converting for the call does not copy: the compiler passes s's bytes.
	return Append(b, unsafeString(s))
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hasByte reports whether any byte of x equals c (the classic zero-byte test
// on x ^ c in every byte; exact, with no false positives when no byte of x
// has its high bit set, which plain8 checks first).
func hasByte(x uint64, c byte) bool {
	y := x ^ (ones * uint64(c))
	return (y-ones)&^y&highs != 0
}

// plain8 reports whether eight bytes are all printable ASCII that JSON
// strings carry as they are.
func plain8(x uint64) bool {
	if x&highs != 0 { // non-ASCII: the slow path checks the UTF-8
		return false
	}
	if (x-ones*0x20)&highs != 0 { // a byte below 0x20 (no borrow can come from above: all bytes < 0x80)
		return false
	}
	return !hasByte(x, '"') && !hasByte(x, '\\') && !hasByte(x, '<') && !hasByte(x, '>') && !hasByte(x, '&')
}
