package sqltext

import "strings"

// Where a statement ends is decided exactly as sqlite3_complete decides it
// (SQLite's complete.c): a token scanner (strings, quoted identifiers and
// comments hide their semicolons) feeding an eight-state machine that tells
// a CREATE TRIGGER's body apart. Inside a trigger a statement ends only at
// "; END ;", so a CASE ... END inside the body does not end it. The
// server's splitters (Hrana's one-statement check and "sequence", the JSON
// API's scripts) and the shell's all use this one machine; tests compare it
// with SQLite's own sqlite3_complete.

// Tokens of the machine.
const (
	tkSemi = iota
	tkWS
	tkOther
	tkExplain
	tkCreate
	tkTemp
	tkTrigger
	tkEnd
)

// States of the machine; stStart after a semicolon means a statement ended.
const (
	stInvalid = iota // nothing yet
	stStart          // at the start of a statement, after a ';'
	stNormal         // in an ordinary statement
	stExplain        // after EXPLAIN at the start
	stCreate         // after CREATE (and TEMP)
	stTrigger        // in a CREATE TRIGGER
	stSemi           // in a trigger, after a ';'
	stEnd            // in a trigger, after "; END"
)

// completeTrans is complete.c's trans[state][token].
var completeTrans = [8][8]uint8{
	stInvalid: {stStart, stInvalid, stNormal, stExplain, stCreate, stNormal, stNormal, stNormal},
	stStart:   {stStart, stStart, stNormal, stExplain, stCreate, stNormal, stNormal, stNormal},
	stNormal:  {stStart, stNormal, stNormal, stNormal, stNormal, stNormal, stNormal, stNormal},
	stExplain: {stStart, stExplain, stExplain, stNormal, stCreate, stNormal, stNormal, stNormal},
	stCreate:  {stStart, stCreate, stNormal, stNormal, stNormal, stCreate, stTrigger, stNormal},
	stTrigger: {stSemi, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger},
	stSemi:    {stSemi, stSemi, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stEnd},
	stEnd:     {stStart, stEnd, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger, stTrigger},
}

// idChar is SQLite's IdChar: letters, digits, '_', '$' and every byte of a
// multi-byte UTF-8 character.
func idChar(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// nextToken reads the token at src[i]: its kind and the index after it.
// incomplete: an unterminated string, identifier or /* comment runs to the
// end of src (sqlite3_complete answers "incomplete"); tailComment: a --
// comment with no newline runs to the end.
func nextToken(src string, i int) (tok, next int, incomplete, tailComment bool) {
	switch c := src[i]; c {
	case ';':
		return tkSemi, i + 1, false, false
	case ' ', '\r', '\t', '\n', '\f':
		return tkWS, i + 1, false, false
	case '/':
		if i+1 >= len(src) || src[i+1] != '*' {
			return tkOther, i + 1, false, false
		}
		end := strings.Index(src[i+2:], "*/")
		if end < 0 {
			return tkWS, len(src), true, false
		}
		return tkWS, i + 2 + end + 2, false, false
	case '-':
		if i+1 >= len(src) || src[i+1] != '-' {
			return tkOther, i + 1, false, false
		}
		end := strings.IndexByte(src[i:], '\n')
		if end < 0 {
			return tkWS, len(src), false, true
		}
		return tkWS, i + end + 1, false, false
	case '[', '`', '"', '\'':
		closer := c
		if c == '[' {
			closer = ']'
		}
		end := strings.IndexByte(src[i+1:], closer)
		if end < 0 {
			return tkOther, len(src), true, false
		}
		return tkOther, i + 1 + end + 1, false, false
	default:
		if !idChar(c) {
			return tkOther, i + 1, false, false
		}
		j := i + 1
		for j < len(src) && idChar(src[j]) {
			j++
		}
		switch w := src[i:j]; {
		case strings.EqualFold(w, "CREATE"):
			return tkCreate, j, false, false
		case strings.EqualFold(w, "TRIGGER"):
			return tkTrigger, j, false, false
		case strings.EqualFold(w, "TEMP"), strings.EqualFold(w, "TEMPORARY"):
			return tkTemp, j, false, false
		case strings.EqualFold(w, "END"):
			return tkEnd, j, false, false
		case strings.EqualFold(w, "EXPLAIN"):
			return tkExplain, j, false, false
		}
		return tkOther, j, false, false
	}
}

// Complete is sqlite3_complete: whether sql ends with a complete statement
// (its last token is the semicolon that ends a statement, blanks and
// comments after it aside).
func Complete(sql string) bool {
	state := uint8(stInvalid)
	for i := 0; i < len(sql); {
		tok, next, incomplete, tail := nextToken(sql, i)
		if incomplete {
			return false
		}
		if tail {
			return state == stStart
		}
		state, i = completeTrans[state][tok], next
	}
	return state == stStart
}

// Statements cuts src into its complete statements, each from the end of
// the one before to its own ';' (kept), blanks around it trimmed, and
// returns what follows the last one: an unfinished statement, or "" when
// only blanks and comments follow. Statements of nothing but blanks,
// comments and ';' are dropped.
func Statements(src string) (stmts []string, rest string) {
	state := uint8(stInvalid)
	start, significant := 0, false
	for i := 0; i < len(src); {
		tok, next, incomplete, _ := nextToken(src, i)
		if incomplete {
			return stmts, src[start:]
		}
		state, i = completeTrans[state][tok], next
		switch {
		case tok == tkSemi && state == stStart:
			if significant {
				stmts = append(stmts, strings.TrimSpace(src[start:i]))
			}
			start, significant = i, false
		case tok != tkWS && tok != tkSemi:
			significant = true
		}
	}
	if !significant {
		return stmts, ""
	}
	return stmts, src[start:]
}
