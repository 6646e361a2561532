package stream

import (
	"strings"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// errManyStatements answers a Stmt whose text holds several statements, with
// sqld's code and wording. Running them all and answering with the last one
// would hide the others' results and errors; scripts go through "sequence".
var errManyStatements = proto.Error{Code: "SQL_MANY_STATEMENTS", Message: "SQL string contains more than one statement"}

// SingleStatement returns the one statement sql holds, without the blank
// and comment-only pieces around its semicolons ("SELECT 1;;" runs as
// "SELECT 1"), or an error when it holds several.
func SingleStatement(sql string) (string, *proto.Error) {
	// The common case needs no scan; a NUL is refused further down, with
	// its own message, before SQLite would stop reading at it.
	if !strings.Contains(sql, ";") || strings.IndexByte(sql, 0) >= 0 {
		return sql, nil
	}
	stmts := sqltext.Split(sql)
	switch len(stmts) {
	case 0:
		return sql, nil // nothing but blanks and comments: SQLite says what that is
	case 1:
		return stmts[0], nil
	}
	e := errManyStatements
	return sql, &e
}
