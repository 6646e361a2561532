package sqltext

import "strings"

// Token is one lexical token of SQL text: a word (keyword or bare
// identifier), a quoted identifier or string, a number, or one punctuation
// byte. Start and End are byte offsets into the text.
type Token struct {
	Text       string
	Start, End int
	Quoted     byte // the quote of a quoted identifier or string ('\'', '"', '`', '['); 0 otherwise
}

// Word is the token's text upper-cased when it is a bare word, else "".
func (t Token) Word() string {
	if t.Quoted != 0 || t.Text == "" || !isWordByte(t.Text[0]) {
		return ""
	}
	return strings.ToUpper(t.Text)
}

// Name is the identifier the token spells: a bare word as written, a quoted
// identifier without its quotes (doubled quotes undone).
func (t Token) Name() string {
	switch t.Quoted {
	case 0:
		return t.Text
	case '[':
		return t.Text[1 : len(t.Text)-1]
	default:
		q := string(t.Quoted)
		inner := strings.TrimSuffix(t.Text[1:], q)
		return strings.ReplaceAll(inner, q+q, q)
	}
}

// Tokens splits sql into tokens, skipping blanks and comments.
func Tokens(sql string) []Token {
	var out []Token
	i := SkipBlanks(sql, 0)
	for i < len(sql) {
		start := i
		var quote byte
		switch c := sql[i]; {
		case c == '\'' || c == '"' || c == '`':
			quote, i = c, skipQuoted(sql, i, c)
		case c == '[':
			quote = '['
			if end := strings.IndexByte(sql[i:], ']'); end < 0 {
				i = len(sql)
			} else {
				i += end + 1
			}
		case isWordByte(c):
			for i < len(sql) && isWordByte(sql[i]) {
				i++
			}
		default:
			i++
		}
		out = append(out, Token{Text: sql[start:i], Start: start, End: i, Quoted: quote})
		i = SkipBlanks(sql, i)
	}
	return out
}
