package dbhost

import (
	"regexp"
	"strings"
	"testing"
)

func TestValidNameMatchesTheDocumentedPattern(t *testing.T) {
	re := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)
	for _, name := range []string{"", "a", "default", "A-b_c9", "_x", "-x", "x.db", "../etc", "a/b", "a b", "é",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "x\x00", "9lives"} {
		if got, want := validName(name), re.MatchString(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}
