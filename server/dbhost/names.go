package dbhost

import "github.com/sluicedb/sluice/server/dberr"

// validName reports whether name matches ^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$,
// the only shape a database name may take: it becomes a file name and a
// replica prefix, so no dots, slashes or other path tricks. (Hand-written:
// it runs on every request.)
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// DefaultDatabase is created on first use so that clients pointed at the
// server's root URL work without creating anything.
const DefaultDatabase = "default"

// ValidateName returns a BAD_NAME *dberr.Error unless name is a valid
// database name.
func ValidateName(name string) error {
	if !validName(name) {
		return dberr.ForDatabase(dberr.CodeBadName, name,
			"invalid database name "+quote(name)+": use 1-64 letters, digits, '_' or '-', starting with a letter or digit")
	}
	return nil
}

// quote quotes a name for a message, cut short if long.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}
