package dbhost

import (
	"net/http"
	"regexp"
)

// validName is the only shape a database name may take: it becomes a file
// name and a replica prefix, so no dots, slashes or other path tricks.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)

// DefaultDatabase is created on first use so that clients pointed at the
// server's root URL work without creating anything.
const DefaultDatabase = "default"

// ValidateName returns a 400 *Error unless name is a valid database name.
func ValidateName(name string) error {
	if !validName.MatchString(name) {
		return &Error{Code: "BAD_NAME", Status: http.StatusBadRequest,
			Message: "invalid database name " + quote(name) + ": use 1-64 letters, digits, '_' or '-', starting with a letter or digit"}
	}
	return nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}
