package sqlshell

import "strings"

// splitStatements cuts src into complete statements, each ending at a
// top-level ';' (kept), and returns what is left (an unfinished statement,
// or only blanks and comments). A ';' inside quotes, comments or a
// trigger's BEGIN ... END body does not end a statement.
func splitStatements(src string) (stmts []string, rest string) {
	start := 0
	var words []string // the statement's first words, upper case, for CREATE ... TRIGGER
	depth := 0         // BEGIN/CASE ... END nesting inside a trigger
	trigger := false
	significant := false
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(src) {
				if src[j] == c {
					if j+1 < len(src) && src[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(src) {
				return stmts, src[start:] // unterminated: wait for more input
			}
			i, significant = j+1, true
		case c == '[':
			j := strings.IndexByte(src[i:], ']')
			if j < 0 {
				return stmts, src[start:]
			}
			i, significant = i+j+1, true
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				i = len(src)
			} else {
				i += j + 1
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return stmts, src[start:]
			}
			i += j + 4
		case isWordByte(c):
			j := i
			for j < len(src) && isWordByte(src[j]) {
				j++
			}
			w := strings.ToUpper(src[i:j])
			if len(words) < 4 {
				words = append(words, w)
				trigger = trigger || isCreateTrigger(words)
			}
			if trigger {
				switch w {
				case "BEGIN", "CASE":
					depth++
				case "END":
					depth--
				}
			}
			i, significant = j, true
		case c == ';':
			i++
			if trigger && depth > 0 {
				continue
			}
			if significant {
				stmts = append(stmts, strings.TrimSpace(src[start:i]))
			}
			start, words, depth, trigger, significant = i, nil, 0, false, false
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				significant = true
			}
			i++
		}
	}
	if !significant {
		return stmts, ""
	}
	return stmts, src[start:]
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// isCreateTrigger: CREATE [TEMP|TEMPORARY] TRIGGER.
func isCreateTrigger(words []string) bool {
	if len(words) < 2 || words[0] != "CREATE" {
		return false
	}
	if words[1] == "TRIGGER" {
		return true
	}
	return len(words) >= 3 && (words[1] == "TEMP" || words[1] == "TEMPORARY") && words[2] == "TRIGGER"
}
