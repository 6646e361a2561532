package sqlconn

import (
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// libSQL, and so every libSQL client's local file and Turso, accepts
//
//	ALTER TABLE t ALTER COLUMN c TO c <type and constraints>
//
// which changes a column's declared type, NOT NULL, DEFAULT, CHECK, COLLATE
// or REFERENCES clause in place: the table's CREATE statement is rewritten,
// existing rows are not checked, later writes obey the new definition.
// drizzle-kit emits it for libSQL databases. SQLite's grammar has no such
// statement, so sluice carries it out itself, with the same rules.

// alterColumn is one parsed ALTER COLUMN statement.
type alterColumn struct {
	table, column string
	definition    string // the new column definition, starting with its name
	defTokens     []sqltext.Token
}

// parseAlterColumn recognises libSQL's ALTER COLUMN statement; ok is false
// for anything else (which SQLite then parses, or refuses, itself).
func parseAlterColumn(stmt string) (a alterColumn, ok bool) {
	toks := sqltext.Tokens(stmt)
	for len(toks) > 0 && toks[len(toks)-1].Text == ";" {
		toks = toks[:len(toks)-1]
	}
	if len(toks) < 7 || toks[0].Word() != "ALTER" || toks[1].Word() != "TABLE" {
		return a, false
	}
	i := 2
	a.table = toks[i].Name()
	if i+2 < len(toks) && toks[i+1].Text == "." {
		if !strings.EqualFold(a.table, "main") {
			a.table = "" // only main's tables; flagged below
		} else {
			a.table = toks[i+2].Name()
		}
		i += 2
	}
	i++
	if i >= len(toks) || toks[i].Word() != "ALTER" {
		return a, false
	}
	i++
	if i < len(toks) && toks[i].Word() == "COLUMN" {
		i++
	}
	if i+2 >= len(toks) || toks[i+1].Word() != "TO" {
		return a, false
	}
	a.column = toks[i].Name()
	a.defTokens = toks[i+2:]
	a.definition = stmt[a.defTokens[0].Start:a.defTokens[len(a.defTokens)-1].End]
	return a, true
}

func alterError(msg string) *dberr.Error { return dberr.New(dberr.CodeSQLiteError, msg) }

// runAlterColumn applies a on c inside a savepoint: the rewritten CREATE
// statement replaces the old one in sqlite_schema, the schema version moves
// on so every connection reloads it, and a definition SQLite cannot parse
// rolls everything back.
func (c *Handle) runAlterColumn(a alterColumn) (Result, error) {
	if c.readOnly {
		return Result{}, dberr.New(dberr.CodeSQLiteReadOnly, "attempt to write a readonly database")
	}
	if a.table == "" {
		return Result{}, alterError("ALTER COLUMN works on tables of the main schema only")
	}
	var createSQL, name string
	err := sqlitex.Execute(c.c, "SELECT sql, name FROM main.sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE",
		&sqlitex.ExecOptions{Args: []any{a.table}, ResultFunc: func(s *sqlite.Stmt) error {
			createSQL, name = s.ColumnText(0), s.ColumnText(1)
			return nil
		}})
	if err != nil {
		return Result{}, err
	}
	if name == "" {
		return Result{}, alterError("no such table: " + a.table)
	}
	newSQL, aerr := rewriteColumn(createSQL, a)
	if aerr != nil {
		return Result{}, aerr
	}
	c.g.internal = true // writable_schema and schema_version are refused to clients
	defer func() { c.g.internal = false }()
	steps := []string{"SAVEPOINT sluice_alter_column", "PRAGMA writable_schema = ON"}
	for _, q := range steps {
		if err := Run(c.c, q); err != nil {
			return Result{}, err
		}
	}
	undo := func(cause error) (Result, error) {
		Run(c.c, "ROLLBACK TO sluice_alter_column")
		Run(c.c, "RELEASE sluice_alter_column")
		Run(c.c, "PRAGMA writable_schema = RESET")
		return Result{}, cause
	}
	if err := sqlitex.Execute(c.c, "UPDATE main.sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?",
		&sqlitex.ExecOptions{Args: []any{newSQL, name}}); err != nil {
		return undo(err)
	}
	if err := Run(c.c, "PRAGMA schema_version = "+strconv.FormatInt(c.schemaVersion()+1, 10)); err != nil {
		return undo(err)
	}
	if err := Run(c.c, "PRAGMA writable_schema = RESET"); err != nil {
		return undo(err)
	}
	// Reloading the schema parses the new definition.
	if err := Run(c.c, `SELECT * FROM main."`+strings.ReplaceAll(name, `"`, `""`)+`" LIMIT 0`); err != nil {
		return undo(alterError("error in altering " + a.column + " of " + name + ": " + sqliteMessage(err.Error(), sqlite.ErrCode(err))))
	}
	if err := Run(c.c, "RELEASE sluice_alter_column"); err != nil {
		return undo(err)
	}
	c.wrote = true
	return Result{}, nil
}

func (c *Handle) schemaVersion() int64 {
	var v int64
	sqlitex.Execute(c.c, "PRAGMA schema_version", &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error {
		v = s.ColumnInt64(0)
		return nil
	}})
	return v
}

// rewriteColumn returns createSQL with a's column definition replaced, or
// an error where libSQL refuses the change: renaming the column, or adding
// UNIQUE, PRIMARY KEY or AUTOINCREMENT (which would need existing rows
// checked or an index built).
func rewriteColumn(createSQL string, a alterColumn) (string, *dberr.Error) {
	if !strings.EqualFold(a.defTokens[0].Name(), a.column) {
		return "", alterError("ALTER COLUMN cannot rename a column: the new definition must start with " + a.column)
	}
	if e := checkOneColumn(a.defTokens); e != nil {
		return "", e
	}
	toks := sqltext.Tokens(createSQL)
	open := -1
	for i, t := range toks {
		if t.Text == "(" {
			open = i
			break
		}
	}
	if open < 0 {
		return "", alterError("table " + a.table + " has no column list to alter (CREATE TABLE ... AS SELECT)")
	}
	// Walk the column list's top-level elements: "name def", or a table
	// constraint.
	depth, elemStart := 0, open+1
	for i := open + 1; i < len(toks); i++ {
		switch toks[i].Text {
		case "(":
			depth++
			continue
		case ")":
			if depth > 0 {
				depth--
				continue
			}
		case ",":
			if depth > 0 {
				continue
			}
		default:
			continue
		}
		elem := toks[elemStart:i]
		if len(elem) > 0 && !isTableConstraint(elem[0]) && strings.EqualFold(elem[0].Name(), a.column) {
			if e := checkNoNewKeys(elem, a.defTokens); e != nil {
				return "", e
			}
			return createSQL[:elem[0].Start] + a.definition + createSQL[elem[len(elem)-1].End:], nil
		}
		if toks[i].Text == ")" {
			break
		}
		elemStart = i + 1
	}
	return "", alterError("no such column: " + a.column)
}

func isTableConstraint(t sqltext.Token) bool {
	switch t.Word() {
	case "CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN":
		return true
	}
	return false
}

// checkNoNewKeys refuses a definition that adds a key the old one lacked.
func checkNoNewKeys(old, def []sqltext.Token) *dberr.Error {
	has := func(toks []sqltext.Token, w string) bool {
		for _, t := range toks {
			if t.Word() == w {
				return true
			}
		}
		return false
	}
	for _, w := range []string{"UNIQUE", "PRIMARY", "AUTOINCREMENT"} {
		if has(def, w) && !has(old, w) {
			return alterError("ALTER COLUMN cannot add " + w + " to an existing column: recreate the table instead")
		}
	}
	return nil
}

// leadingAlterColumn splits a script's first statement off when it is an
// ALTER COLUMN statement.
func leadingAlterColumn(script string) (a alterColumn, rest string, ok bool) {
	if sqltext.FirstKeyword(script) != "ALTER" {
		return a, "", false
	}
	end := len(script)
	for _, t := range sqltext.Tokens(script) {
		if t.Text == ";" {
			end = t.End
			break
		}
	}
	a, ok = parseAlterColumn(script[:end])
	return a, script[end:], ok
}

// checkOneColumn refuses a definition that is more than one column's, or
// that would change how rows are stored: the schema is edited in place, so
// a second column, a table constraint or a generated column would describe
// records or indexes the file does not hold.
func checkOneColumn(def []sqltext.Token) *dberr.Error {
	depth := 0
	for _, t := range def {
		switch t.Text {
		case "(":
			depth++
		case ")":
			depth--
			if depth < 0 {
				return alterError("ALTER COLUMN: unbalanced parentheses in the new definition")
			}
		case ",", ";":
			if depth == 0 {
				return alterError("ALTER COLUMN takes one column definition")
			}
		}
		if depth == 0 && (t.Word() == "GENERATED" || t.Word() == "AS") {
			return alterError("ALTER COLUMN cannot make a generated column: recreate the table instead")
		}
	}
	if depth != 0 {
		return alterError("ALTER COLUMN: unbalanced parentheses in the new definition")
	}
	return nil
}
