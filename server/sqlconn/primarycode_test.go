package sqlconn

import "testing"

func TestPrimaryCode(t *testing.T) {
	for code, want := range map[string]struct {
		primary  string
		extended bool
	}{
		"SQLITE_CONSTRAINT_UNIQUE":     {"SQLITE_CONSTRAINT", true},
		"SQLITE_CONSTRAINT_FOREIGNKEY": {"SQLITE_CONSTRAINT", true},
		"SQLITE_CONSTRAINT_NOTNULL":    {"SQLITE_CONSTRAINT", true},
		"SQLITE_IOERR_WRITE":           {"SQLITE_IOERR", true},
		"SQLITE_BUSY_SNAPSHOT":         {"SQLITE_BUSY", true},
		"SQLITE_CONSTRAINT":            {"SQLITE_CONSTRAINT", false},
		"SQLITE_ERROR":                 {"SQLITE_ERROR", false},
		"TIMEOUT":                      {"TIMEOUT", false},
		"SQLITE_NOT_A_CODE":            {"SQLITE_NOT_A_CODE", false},
	} {
		if p, ext := PrimaryCode(code); p != want.primary || ext != want.extended {
			t.Errorf("PrimaryCode(%s) = %s, %v; want %s, %v", code, p, ext, want.primary, want.extended)
		}
	}
}
