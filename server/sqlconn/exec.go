package sqlconn

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/sqlitestmt"
	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
)

// Exec runs every statement in st.SQL in order and returns the last one's
// result; arguments bind to each statement. SQL that holds no statement
// (blanks, comments, semicolons) returns an empty result, as SQLite does.
func (c *Handle) Exec(ctx context.Context, st Stmt) (res Result, err error) {
	if sqltext.FirstKeyword(st.SQL) == "VACUUM" {
		// VACUUM INTO writes a file anywhere; plain VACUUM rewrites the whole
		// database under the write lock. Neither belongs on a shared server.
		return Result{}, dberr.New(dberr.CodeForbidden, "statement refused: VACUUM is not available through the server")
	}
	if strings.IndexByte(st.SQL, 0) >= 0 {
		return Result{}, errNUL
	}
	c.intr.arm(ctx, c.timeout)
	c.g.reset()
	c.wrote = false
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, panicError(p)
		}
		fired := c.intr.disarm() == interruptedByDeadline
		if cap(c.row.scratch) > scratchKeep {
			c.row.scratch = nil // a huge value's buffer goes back to the collector
		}
		err = c.sqlError(err, fired)
	}()
	return c.exec(st)
}

// errNUL refuses SQL with a NUL character, where SQLite would silently
// stop reading the text.
var errNUL = dberr.New(dberr.CodeSQLiteError, "the SQL text contains a NUL character")

// panicError reports a panic of the SQLite layer as an error: no input may
// take the process, or a lock it holds, down with it.
func panicError(p any) *dberr.Error {
	return dberr.New(dberr.CodeInternal, fmt.Sprintf("internal error while running the statement (%v); it was not applied", p))
}

// prepare returns sql's first statement: cached on the connection when the
// text is one statement and the cache has room, else transient (finalize
// says which). rest is the text after the first statement.
func (c *Handle) prepare(sql string) (s *sqlite.Stmt, rest string, finalize bool, err error) {
	if c.cached[sql] || len(c.cached) < maxCachedStmts {
		s, err := c.c.Prepare(sql)
		if err == nil {
			if sqlitestmt.Empty(s) { // never keep a statement that cannot be reset
				s.Finalize()
				delete(c.cached, sql)
				return s, "", false, nil
			}
			c.cached[sql] = true
			return s, "", false, nil
		}
		if !strings.Contains(err.Error(), "trailing bytes") {
			return nil, "", false, err
		}
	}
	s, trailing, err := c.c.PrepareTransient(sql)
	if err != nil {
		return nil, "", false, err
	}
	return s, sql[len(sql)-trailing:], true, nil
}

func (c *Handle) exec(st Stmt) (Result, error) {
	start := time.Now()
	var res Result
	rest, ran := st.SQL, false
	for !ran || !sqltext.IsBlank(rest) {
		if a, next, ok := leadingAlterColumn(rest); ok {
			if len(st.Args) > 0 || len(st.NamedArgs) > 0 {
				return Result{}, alterError("ALTER COLUMN takes no arguments")
			}
			var err error
			if res, err = c.runAlterColumn(a); err != nil {
				return Result{}, err
			}
			rest, ran = next, true
			continue
		}
		s, next, finalize, err := c.prepare(rest)
		if err != nil {
			return Result{}, err
		}
		if finalize && len(next) == len(rest) { // nothing consumed: never loop on it
			s.Finalize()
			return Result{}, dberr.New(dberr.CodeSQLiteError, "cannot parse the SQL text")
		}
		text := rest[:len(rest)-len(next)]
		rest, ran = next, true
		if sqlitestmt.Empty(s) {
			err := bindArgs(s, st, false) // arguments for no statement are an error
			if finalize {
				s.Finalize()
			}
			if err != nil {
				return Result{}, err
			}
			continue
		}
		res, err = c.run(s, st, text, start)
		if finalize {
			s.Finalize()
		} else {
			s.Reset()
			s.ClearBindings()
		}
		if err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

func (c *Handle) run(s *sqlite.Stmt, st Stmt, text string, start time.Time) (Result, error) {
	if err := bindArgs(s, st, c.in.Explain(s)); err != nil {
		return Result{}, err
	}
	if !c.in.ReadOnly(s) {
		c.wrote = true
	}
	res := Result{Columns: c.columns(s)}
	n := len(res.Columns)
	kw := sqltext.FirstKeyword(text)
	var before int64
	switch kw {
	case "WITH":
		before = c.TotalChanges()
	case "SAVEPOINT", "RELEASE", "ROLLBACK": // plain ROLLBACK is refused where it matters
		c.savepoint = true
	}
	stream := st.WantRows && st.Rows != nil
	if stream {
		st.Rows.Columns(res.Columns)
		c.row.s, c.row.n = s, n
		defer func() { c.row.s = nil }()
	}
	for {
		row, err := s.Step()
		if err != nil {
			return Result{}, err
		}
		if !row {
			break
		}
		res.RowsRead++
		switch {
		case stream:
			st.Rows.Row(&c.row)
		case st.WantRows:
			res.Rows = append(res.Rows, readRow(s, n))
		}
	}
	switch kw {
	case "INSERT", "UPDATE", "DELETE", "REPLACE":
		res.Changes = int64(c.c.Changes())
	case "WITH":
		// A WITH that wrote reports its own rows, as INSERT does: not the
		// rows its triggers and foreign-key actions changed too.
		if c.TotalChanges() > before {
			res.Changes = int64(c.c.Changes())
		}
	}
	res.RowsWritten = res.Changes
	res.LastInsertRowID = c.c.LastInsertRowID()
	res.Duration = time.Since(start)
	return res, nil
}

// columns names s's result columns as SQLite does, repeated names kept, with
// their declared types.
func (c *Handle) columns(s *sqlite.Stmt) []Column {
	n := s.ColumnCount()
	if n == 0 {
		return nil
	}
	cols := make([]Column, n)
	for i := range cols {
		cols[i] = Column{Name: c.in.ColumnName(s, i), DeclType: c.in.DeclType(s, i)}
	}
	return cols
}

func readRow(s *sqlite.Stmt, n int) []Value {
	row := make([]Value, n)
	for i := range row {
		switch s.ColumnType(i) {
		case sqlite.TypeInteger:
			row[i] = Value{Type: Integer, Int: s.ColumnInt64(i)}
		case sqlite.TypeFloat:
			row[i] = Value{Type: Float, Float: s.ColumnFloat(i)}
		case sqlite.TypeText:
			row[i] = Value{Type: Text, Text: s.ColumnText(i)}
		case sqlite.TypeBlob:
			b := make([]byte, s.ColumnLen(i))
			s.ColumnBytes(i, b)
			row[i] = Value{Type: Blob, Blob: b}
		default:
			row[i] = Value{Type: Null}
		}
	}
	return row
}
