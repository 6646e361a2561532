package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"testing"
	"time"

	_ "github.com/tursodatabase/libsql-client-go/libsql" // the "libsql" driver; its file: URLs use modernc's "sqlite"
)

// runGoClient is the conformance script of libsql-client-go through
// database/sql: what a Go application scans, including DATETIME columns into
// time.Time, which needs the column's declared type from the server.
func runGoClient(t *testing.T, tg target) map[string]any {
	t.Helper()
	// libsql-client-go hands file: URLs to modernc's "sqlite" driver but returns
	// no Result from Exec on them, so the local side opens that driver itself.
	driver, dsn := "libsql", tg.http
	if tg.kind == "local" {
		driver, dsn = "sqlite", tg.file
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]any{}
	var ctx context.Context
	step := func(name string, fn func() (any, error)) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		defer func() {
			// database/sql panics on a driver's nil Result; record it as that step's outcome.
			if p := recover(); p != nil {
				out[name] = map[string]any{"error": fmt.Sprint("panic: ", p)}
			}
		}()
		v, err := fn()
		if err != nil {
			out[name] = map[string]any{"error": sqliteMessage(err)}
			return
		}
		out[name] = map[string]any{"ok": v}
	}
	exec := func(q string, args ...any) func() (any, error) {
		return func() (any, error) {
			res, err := db.ExecContext(ctx, q, args...)
			if err != nil {
				return nil, err
			}
			n, _ := res.RowsAffected()
			return n, nil
		}
	}
	step("drop", exec("DROP TABLE IF EXISTS events"))
	step("create", exec("CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, at DATETIME, done BOOLEAN, score REAL, raw BLOB)"))
	step("index", exec("CREATE INDEX IF NOT EXISTS events_at ON events(at)"))
	// Times in forms libsql-client-go parses (it reads offsets as +00:00, not Z).
	step("insert", exec("INSERT INTO events (name, at, done, score, raw) VALUES (?, ?, ?, ?, ?), ('second', '2024-01-02 03:04:05', 0, NULL, NULL)",
		"first", "2024-05-06T07:08:09", true, 1.5, []byte{0, 1, 255}))
	step("scan time", func() (any, error) {
		var at time.Time
		var done bool
		if err := db.QueryRowContext(ctx, "SELECT at, done FROM events WHERE name = 'second'").Scan(&at, &done); err != nil {
			return nil, err
		}
		return fmt.Sprintf("%s %v", at.UTC().Format(time.RFC3339), done), nil
	})
	// What an application scanning into any gets: the column names (the
	// duplicate kept) and each value's Go type, which for DATETIME depends on
	// the declared type the server sends. (libsql-client-go does not expose
	// declared types through ColumnTypes, against any server.)
	step("column names and scanned types", func() (any, error) {
		rows, err := db.QueryContext(ctx, "SELECT id, name, at, done, score, raw, 1 AS id FROM events ORDER BY id")
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		names, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		var got []string
		for rows.Next() {
			vals := make([]any, len(names))
			ptrs := make([]any, len(names))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			for i, v := range vals {
				got = append(got, fmt.Sprintf("%s:%T", names[i], v))
			}
		}
		return got, rows.Err()
	})
	// No infinities step: Hrana's JSON encoding cannot carry them (sqld sends
	// null, as sluice does; the protobuf encoding carries them), and this client
	// speaks only JSON, so it cannot scan SELECT 1e999 into a float64 from any
	// server. server/hrana's protocol tests pin the encoding.
	step("unique violation", exec("INSERT INTO events (name) VALUES ('first')"))
	step("syntax error", exec("SELEC 1"))
	step("table_info", func() (any, error) {
		rows, err := db.QueryContext(ctx, "PRAGMA table_info(events)")
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var cid, notnull, pk int
			var name, typ string
			var dflt sql.NullString
			if err := rows.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
				return nil, err
			}
			got = append(got, fmt.Sprintf("%d %s %s %d %d", cid, name, typ, notnull, pk))
		}
		return got, rows.Err()
	})
	step("transaction", func() (any, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO events (name) VALUES ('in tx')"); err != nil {
			return nil, err
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
			return nil, err
		}
		return n, tx.Commit()
	})
	return out
}

// Wrapping that belongs to a client, not to what the database answered:
// libsql-client-go's "failed to execute SQL:" line, and modernc's (the local
// side's) SQLite category prefix and numeric code suffix. Anything a server adds
// is kept, so it shows in the diff.
var (
	goClientPrefix = regexp.MustCompile(`^failed to execute SQL:\n`)
	moderncPrefix  = regexp.MustCompile(`^(?:constraint failed|SQL logic error): `)
	moderncSuffix  = regexp.MustCompile(` \(\d+\)$`)
)

// sqliteMessage is the error as the application's user reads it from SQLite.
func sqliteMessage(err error) string {
	m := goClientPrefix.ReplaceAllString(err.Error(), "")
	m = moderncSuffix.ReplaceAllString(m, "")
	return moderncPrefix.ReplaceAllString(m, "")
}
