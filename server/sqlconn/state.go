package sqlconn

import (
	"sort"
	"strings"
)

// stateProbe is one query whose answer is the connection's state as a
// client can change it: every connection-state pragma, case_sensitive_like
// (which cannot be read, only observed) and the number of TEMP objects. Two
// answers differ exactly when a client changed something a fresh connection
// would not have.
var stateProbe = func() string {
	var names []string
	for name, kind := range pragmaKinds {
		if kind == pragmaState && name != "case_sensitive_like" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	cols := []string{"('a' LIKE 'A')", "(SELECT count(*) FROM temp.sqlite_master)"}
	for _, n := range names {
		cols = append(cols, "(SELECT * FROM pragma_"+n+")")
	}
	return "SELECT " + strings.Join(cols, " || ',' || ")
}()

// State answers stateProbe on c: two answers differ exactly when a client
// changed something a fresh connection would not have.
func (c *Handle) State() (string, error) {
	s, err := c.c.Prepare(stateProbe)
	if err != nil {
		return "", err
	}
	defer s.Reset()
	if _, err := s.Step(); err != nil {
		return "", err
	}
	return s.ColumnText(0), nil
}
