// Package sqltext reads what the text of SQL says before SQLite sees it: the
// leading keywords, a statement's role in transactions (BEGIN, COMMIT,
// ROLLBACK, SAVEPOINT), and where the statements of a script end. Whether a
// statement reads or writes is not decided here: SQLite says that when it
// prepares the statement on the connection that runs it.
//
// Where a statement ends follows sqlite3_complete's rules exactly (Complete,
// Statements, Split), for the server and the shell alike. It imports only
// the standard library.
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

// Split splits a semicolon-separated script into statements where
// sqlite3_complete finds their ends (see Statements), without their final
// ';'; an unfinished statement at the end is kept, for SQLite to judge.
// Statements that hold only blanks and comments are dropped.
func Split(script string) []string {
	stmts, rest := Statements(script)
	out := make([]string, 0, len(stmts)+1)
	for _, s := range stmts {
		out = append(out, strings.TrimSpace(strings.TrimSuffix(s, ";")))
	}
	if !IsBlank(rest) {
		out = append(out, strings.TrimSpace(rest))
	}
	return out
}

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
