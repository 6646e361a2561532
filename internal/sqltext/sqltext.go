// Package sqltext reads what the text of SQL says before SQLite sees it: the
// leading keywords, a statement's role in transactions (BEGIN, COMMIT,
// ROLLBACK, SAVEPOINT), and where the statements of a script end. Whether a
// statement reads or writes is not decided here: SQLite says that when it
// prepares the statement on the connection that runs it.
//
// It imports only the standard library; server/dbhost and server/hrana use it.
package sqltext

import "strings"

// TxKind says how a statement interacts with transactions, which decides
// where it may run: a write group cannot run BEGIN/COMMIT/ROLLBACK because it
// already sits inside a savepoint of a transaction shared with other requests.
type TxKind int

const (
	Plain     TxKind = iota // any statement that is not transaction control
	Begin                   // BEGIN [DEFERRED|IMMEDIATE|EXCLUSIVE] [TRANSACTION]
	Commit                  // COMMIT or END
	Rollback                // ROLLBACK (the whole transaction)
	Savepoint               // SAVEPOINT, RELEASE, ROLLBACK TO
)

// TxRole is a statement's transaction role.
type TxRole struct {
	Kind TxKind
	// ReadOnlyBegin marks libSQL's "BEGIN TRANSACTION READONLY", which stock
	// SQLite does not parse; it is run as BEGIN DEFERRED and writes are refused.
	ReadOnlyBegin bool
}

// IsTxControl reports whether the statement begins or ends a transaction or
// a savepoint.
func (r TxRole) IsTxControl() bool { return r.Kind != Plain }

// Classify reads the leading keywords of sql (skipping blanks and comments).
func Classify(sql string) TxRole {
	words := LeadingWords(sql, 4)
	if len(words) == 0 {
		return TxRole{Kind: Plain}
	}
	switch words[0] {
	case "BEGIN":
		c := TxRole{Kind: Begin}
		for _, w := range words[1:] {
			if w == "READONLY" {
				c.ReadOnlyBegin = true
			}
		}
		return c
	case "COMMIT", "END":
		return TxRole{Kind: Commit}
	case "ROLLBACK":
		rest := words[1:]
		if len(rest) > 0 && rest[0] == "TRANSACTION" {
			rest = rest[1:]
		}
		if len(rest) > 0 && rest[0] == "TO" {
			return TxRole{Kind: Savepoint}
		}
		return TxRole{Kind: Rollback}
	case "SAVEPOINT", "RELEASE":
		return TxRole{Kind: Savepoint}
	}
	return TxRole{Kind: Plain}
}

// FirstKeyword returns the upper-cased first keyword of sql, or "" when it
// starts with something else (or holds only blanks and comments).
func FirstKeyword(sql string) string {
	if w := LeadingWords(sql, 1); len(w) == 1 {
		return w[0]
	}
	return ""
}

// IsBlank reports whether sql holds nothing but blanks, comments and
// semicolons: SQLite prepares no statement from it.
func IsBlank(sql string) bool {
	i := 0
	for {
		i = SkipBlanks(sql, i)
		if i < len(sql) && sql[i] == ';' {
			i++
			continue
		}
		return i >= len(sql)
	}
}

// LeadingWords returns up to n upper-cased leading keywords of sql, stopping at
// the first token that is not a bare word.
func LeadingWords(sql string, n int) []string {
	var words []string
	i := 0
	for len(words) < n {
		i = SkipBlanks(sql, i)
		start := i
		for i < len(sql) && isWordByte(sql[i]) {
			i++
		}
		if i == start {
			break
		}
		words = append(words, strings.ToUpper(sql[start:i]))
	}
	return words
}

func isWordByte(b byte) bool {
	return b == '_' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

// SkipBlanks skips whitespace and SQL comments from i.
func SkipBlanks(sql string, i int) int {
	for i < len(sql) {
		switch {
		case sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r' || sql[i] == '\f':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case strings.HasPrefix(sql[i:], "/*"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return len(sql)
			}
			i += 2 + end + 2
		default:
			return i
		}
	}
	return i
}

// Split splits a semicolon-separated script into statements the way
// sqlite3_complete finds their ends: semicolons inside quotes, identifiers,
// comments and CREATE TRIGGER bodies (up to "END;") do not split. Statements
// that hold only blanks and comments are dropped.
func Split(script string) []string {
	var out []string
	start := 0
	inTrigger := false
	lastWord := ""
	wordsInStmt := 0
	var head []string // first words of the current statement, to spot CREATE [TEMP] TRIGGER
	i := 0
	emit := func(end int) {
		s := script[start:end]
		if SkipBlanks(s, 0) < len(s) {
			out = append(out, strings.TrimSpace(s))
		}
		start = end + 1
		inTrigger, lastWord, wordsInStmt, head = false, "", 0, head[:0]
	}
	for i < len(script) {
		c := script[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(script, i, c)
			lastWord = ""
		case c == '[':
			end := strings.IndexByte(script[i:], ']')
			if end < 0 {
				i = len(script)
			} else {
				i += end + 1
			}
			lastWord = ""
		case strings.HasPrefix(script[i:], "--") || strings.HasPrefix(script[i:], "/*"):
			i = SkipBlanks(script, i)
		case isWordByte(c):
			j := i
			for j < len(script) && isWordByte(script[j]) {
				j++
			}
			w := strings.ToUpper(script[i:j])
			if wordsInStmt < 3 {
				head = append(head, w)
				if isCreateTrigger(head) {
					inTrigger = true
				}
			}
			wordsInStmt++
			lastWord = w
			i = j
		case c == ';':
			if !inTrigger || lastWord == "END" {
				emit(i)
			}
			lastWord = ""
			i++
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				lastWord = ""
			}
			i++
		}
	}
	if start < len(script) {
		s := script[start:]
		if SkipBlanks(s, 0) < len(s) {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

func isCreateTrigger(head []string) bool {
	if len(head) < 2 || head[0] != "CREATE" {
		return false
	}
	if head[1] == "TRIGGER" {
		return true
	}
	return len(head) >= 3 && (head[1] == "TEMP" || head[1] == "TEMPORARY") && head[2] == "TRIGGER"
}

// skipQuoted skips a quoted string or identifier starting at i; a doubled
// quote character escapes itself.
func skipQuoted(s string, i int, q byte) int {
	i++
	for i < len(s) {
		if s[i] == q {
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return i
}
