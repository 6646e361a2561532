package sqlshell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/internal/sqltext"
)

// Local is a SQLite file opened directly, read-write, with the SQLite build
// sluice itself uses. A sidecar replicating the file (sluice replicate or
// run) ships what is written here like any other write.
type Local struct {
	path string
	conn *sqlite.Conn
}

// ErrNoDatabase: the local file does not exist (and creating it was not asked for).
var ErrNoDatabase = errors.New("no such database file")

// OpenLocal opens the database at path; it must exist unless create.
func OpenLocal(path string, create bool) (*Local, error) {
	if !create {
		if _, err := os.Stat(path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s: %w (pass -create to make a new one)", path, ErrNoDatabase)
			}
			return nil, err
		}
	}
	flags := sqlite.OpenReadWrite | sqlite.OpenURI // the journal mode stays what it is
	if create {
		flags |= sqlite.OpenCreate
	}
	conn, err := sqliteconn.Open(path, flags)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	conn.SetBusyTimeout(5 * time.Second)
	return &Local{path: path, conn: conn}, nil
}

func (l *Local) Describe() string { return l.path }

func (l *Local) Close() error { return sqliteconn.Close(l.conn) }

// Exec runs one statement (the shell splits scripts; SQL after the first
// statement is an error rather than silently ignored).
func (l *Local) Exec(ctx context.Context, query string) (Result, error) {
	done := ctx.Done()
	prev := l.conn.SetInterrupt(done)
	defer l.conn.SetInterrupt(prev)
	stmt, trailing, err := l.conn.PrepareTransient(query)
	if err != nil {
		return Result{}, err
	}
	defer stmt.Finalize()
	if rest := strings.TrimSpace(query[len(query)-trailing:]); rest != "" {
		if stmts, tail := sqltext.Statements(rest); len(stmts) > 0 || strings.TrimSpace(tail) != "" {
			return Result{}, fmt.Errorf("more than one statement given: %q", rest)
		}
	}
	var res Result
	n := stmt.ColumnCount()
	for i := 0; i < n; i++ {
		res.Columns = append(res.Columns, stmt.ColumnName(i))
	}
	for {
		row, err := stmt.Step()
		if err != nil {
			return Result{}, err
		}
		if !row {
			break
		}
		vals := make([]Value, n)
		for i := range vals {
			vals[i] = column(stmt, i)
		}
		res.Rows = append(res.Rows, vals)
	}
	res.Changes = int64(l.conn.Changes())
	res.LastInsertID = l.conn.LastInsertRowID()
	return res, nil
}

func column(stmt *sqlite.Stmt, i int) Value {
	switch stmt.ColumnType(i) {
	case sqlite.TypeInteger:
		return Value{Kind: Integer, Int: stmt.ColumnInt64(i)}
	case sqlite.TypeFloat:
		return Value{Kind: Float, Float: stmt.ColumnFloat(i)}
	case sqlite.TypeText:
		return Value{Kind: Text, Text: stmt.ColumnText(i)}
	case sqlite.TypeBlob:
		b := make([]byte, stmt.ColumnLen(i))
		stmt.ColumnBytes(i, b)
		return Value{Kind: Blob, Blob: b}
	}
	return Value{Kind: Null}
}

// Snapshot runs queries inside one read transaction.
func (l *Local) Snapshot(ctx context.Context, queries []string) ([]Result, error) {
	if !l.conn.AutocommitEnabled() {
		return nil, errors.New("a transaction is open: COMMIT or ROLLBACK it first")
	}
	if _, err := l.Exec(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	defer l.Exec(context.Background(), "ROLLBACK")
	out := make([]Result, len(queries))
	for i, q := range queries {
		res, err := l.Exec(ctx, q)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// Backup copies the database with VACUUM INTO: one read transaction, so a
// consistent state, written compactly to a file SQLite refuses to overwrite.
func (l *Local) Backup(ctx context.Context, path string) error {
	_, err := l.Exec(ctx, "VACUUM INTO "+quoteString(path))
	return err
}
