package jsonapi

import (
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// A "sql" that holds several statements (a migration script, or
// "DELETE FROM t; SELECT 1") is run as the batch of its statements: one
// transaction, one result per statement, each with its own rows and
// changes. Answering with the last statement's result alone would report
// "changes": 0 for a DELETE that removed rows. Statements end where SQLite's
// sqlite3_complete ends them (a trigger's BEGIN ... END body is one).

// scriptStatements returns the statements of st.SQL: st itself when it
// holds one (blanks, comments and stray semicolons aside).
func scriptStatements(st sqlconn.Stmt) ([]sqlconn.Stmt, error) {
	if !strings.Contains(st.SQL, ";") || strings.IndexByte(st.SQL, 0) >= 0 {
		return []sqlconn.Stmt{st}, nil // a NUL is refused when the statement runs
	}
	parts := sqltext.Split(st.SQL)
	if len(parts) <= 1 {
		return []sqlconn.Stmt{st}, nil
	}
	if len(st.Args) > 0 || len(st.NamedArgs) > 0 {
		return nil, badRequest(fmt.Sprintf(`"sql" holds %d statements and "params" bind to one: send each statement with its own params as {"batch": [{"sql": ..., "params": ...}, ...]}`, len(parts)))
	}
	out := make([]sqlconn.Stmt, len(parts))
	for i, p := range parts {
		out[i] = sqlconn.Stmt{SQL: p, WantRows: st.WantRows}
	}
	return out, nil
}

// oneStatement refuses a batch entry that holds several statements: its
// result would describe only the last one. i counts from 1.
func oneStatement(i int, st sqlconn.Stmt) error {
	if !strings.Contains(st.SQL, ";") || strings.IndexByte(st.SQL, 0) >= 0 {
		return nil
	}
	if n := len(sqltext.Split(st.SQL)); n > 1 {
		return badRequest(fmt.Sprintf("batch statement %d holds %d statements: give each statement its own batch entry, so that each gets its own result", i, n))
	}
	return nil
}
