package sqlconn

import (
	"fmt"
	"strconv"

	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
)

func bindArgs(s *sqlite.Stmt, st Stmt, explain bool) error {
	count := s.BindParamCount()
	if st.StrictArgs && max(len(st.Args), len(st.NamedArgs)) > count {
		return argsInvalid(fmt.Sprintf("too many parameters, expected %d found %d", count, max(len(st.Args), len(st.NamedArgs))))
	}
	if len(st.Args) > count {
		return dberr.New(dberr.CodeBadRequest,
			fmt.Sprintf("%d arguments given but the statement has %d parameters", len(st.Args), count))
	}
	for i, v := range st.Args {
		bind(s, i+1, v)
	}
	bound := len(st.Args) // parameters 1..bound have a value
	if len(st.NamedArgs) == 0 && (!st.StrictArgs || bound == count) {
		return nil
	}
	for i := 1; i <= count; i++ {
		name := s.BindParamName(i)
		if name != "" && len(st.NamedArgs) > 0 {
			v, ok := st.NamedArgs[name]
			if !ok { // accept keys given without their prefix
				v, ok = st.NamedArgs[name[1:]]
			}
			if ok {
				bind(s, i, v)
				continue
			}
		}
		// EXPLAIN only compiles the statement: sqld lets it go without values.
		// Named values that miss one of the statement's names are refused
		// even where a missing positional value binds NULL, as on a local
		// file: a misspelled key would otherwise write NULL without a word.
		named := name != "" && len(st.NamedArgs) > 0
		if (st.StrictArgs || named) && i > bound && !explain {
			if name == "" {
				name = strconv.Itoa(i)
			}
			return argsInvalid("value for parameter " + name + " not found")
		}
	}
	return nil
}

func argsInvalid(why string) *dberr.Error {
	return dberr.New(dberr.CodeArgsInvalid, "Arguments do not match SQL parameters: "+why)
}

func bind(s *sqlite.Stmt, i int, v Value) {
	switch v.Type {
	case Integer:
		s.BindInt64(i, v.Int)
	case Float:
		s.BindFloat(i, v.Float)
	case Text:
		s.BindText(i, v.Text)
	case Blob:
		s.BindBytes(i, v.Blob)
	default:
		s.BindNull(i)
	}
}
