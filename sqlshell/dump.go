package sqlshell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/sluicedb/sluice/internal/sqltext"
)

const schemaQuery = "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"

type schemaObject struct{ typ, name, table, sql string }

func parseSchema(res Result) []schemaObject {
	out := make([]schemaObject, 0, len(res.Rows))
	for _, r := range res.Rows {
		if len(r) == 4 {
			out = append(out, schemaObject{r[0].plain(), r[1].plain(), r[2].plain(), r[3].plain()})
		}
	}
	return out
}

// dumpedTables are the tables whose rows a dump writes: ordinary tables
// (virtual tables keep their rows in shadow tables; SQLite's internal tables
// other than sqlite_sequence are rebuilt by SQLite itself).
func dumpedTables(schema []schemaObject) []string {
	var out []string
	for _, o := range schema {
		if o.typ != "table" || strings.HasPrefix(strings.ToUpper(o.sql), "CREATE VIRTUAL") {
			continue
		}
		if strings.HasPrefix(o.name, "sqlite_") && o.name != "sqlite_sequence" {
			continue
		}
		out = append(out, o.name)
	}
	return out
}

// Dump returns the whole database as SQL text that rebuilds it, read in one
// consistent snapshot: the schema is read, then the schema again and every
// table in one read transaction; if the schema changed in between, it tries
// again.
func Dump(ctx context.Context, b Backend) (string, error) {
	for attempt := 0; attempt < 5; attempt++ {
		first, err := b.Snapshot(ctx, []string{schemaQuery})
		if err != nil {
			return "", err
		}
		schema := parseSchema(first[0])
		tables := dumpedTables(schema)
		queries := []string{schemaQuery}
		for _, t := range tables {
			queries = append(queries, "SELECT * FROM "+QuoteIdent(t))
		}
		res, err := b.Snapshot(ctx, queries)
		if err != nil {
			return "", err
		}
		if !reflect.DeepEqual(parseSchema(res[0]), schema) {
			continue // the schema changed between the two reads
		}
		return renderDump(schema, tables, res[1:]), nil
	}
	return "", errors.New("the schema kept changing while it was read; try again")
}

func renderDump(schema []schemaObject, tables []string, rows []Result) string {
	var sb strings.Builder
	sb.WriteString("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")
	data := map[string]Result{}
	for i, t := range tables {
		data[t] = rows[i]
	}
	for _, o := range schema {
		if o.typ != "table" {
			continue
		}
		if o.name == "sqlite_sequence" {
			sb.WriteString("DELETE FROM sqlite_sequence;\n")
		} else if !strings.HasPrefix(o.name, "sqlite_") {
			sb.WriteString(o.sql + ";\n")
		}
		res, ok := data[o.name]
		if !ok {
			continue
		}
		for _, r := range res.Rows {
			sb.WriteString("INSERT INTO " + QuoteIdent(o.name) + " VALUES(")
			for j, v := range r {
				if j > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(v.literal())
			}
			sb.WriteString(");\n")
		}
	}
	for _, o := range schema {
		if o.typ != "table" && !strings.HasPrefix(o.name, "sqlite_") {
			sb.WriteString(o.sql + ";\n")
		}
	}
	sb.WriteString("COMMIT;\n")
	return sb.String()
}

// Backup writes a consistent copy of b's database to path (which must not
// exist): the backend's own copy when it has one (a local file: VACUUM INTO),
// else a new SQLite file rebuilt from a snapshot dump, written beside path
// and renamed into place only once complete.
func Backup(ctx context.Context, b Backend, path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s already exists: .backup never overwrites", path)
	}
	err := b.Backup(ctx, path)
	if !errors.Is(err, ErrNoDirectBackup) {
		return err
	}
	dump, err := Dump(ctx, b)
	if err != nil {
		return err
	}
	tmp := tempPath(path)
	os.Remove(tmp)
	dst, err := OpenLocal(tmp, true)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	stmts, _ := sqltext.Statements(dump)
	for _, s := range stmts {
		if _, err := dst.Exec(ctx, s); err != nil {
			dst.Close()
			return fmt.Errorf("rebuild %s: %w", path, err)
		}
	}
	if err := dst.Close(); err != nil {
		return err
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s appeared while the backup was written: .backup never overwrites", path)
	}
	return os.Rename(tmp, path)
}
