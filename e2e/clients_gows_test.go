package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// runGoClientWS is libsql-client-go over WebSocket as a Go application pools
// it: database/sql reuses one connection (one Hrana stream), so a pragma or a
// TEMP table set on it holds for the statements that follow, also after the
// connection sat idle longer than an interactive transaction may last.
func runGoClientWS(t *testing.T, tg target) map[string]any {
	t.Helper()
	driver, dsn := "libsql", tg.ws
	if tg.kind == "local" {
		driver, dsn = "sqlite", tg.file
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one pooled connection for every step
	db.SetConnMaxIdleTime(0)
	out := map[string]any{}
	step := func(name string, fn func(ctx context.Context) (any, error)) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		v, err := fn(ctx)
		if err != nil {
			out[name] = map[string]any{"error": sqliteMessage(err)}
			return
		}
		out[name] = map[string]any{"ok": v}
	}
	// Changes are counted for INSERT, UPDATE and DELETE only: after anything
	// else a local connection reports the last write's count again.
	exec := func(q string) func(ctx context.Context) (any, error) {
		return func(ctx context.Context) (any, error) {
			res, err := db.ExecContext(ctx, q)
			if err != nil {
				return nil, unwrapGoWS(err, q)
			}
			switch strings.ToUpper(strings.Fields(q)[0]) {
			case "INSERT", "UPDATE", "DELETE":
				n, _ := res.RowsAffected()
				return n, nil
			}
			return "done", nil
		}
	}
	value := func(q string) func(ctx context.Context) (any, error) {
		return func(ctx context.Context) (any, error) {
			var v any
			if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
				return nil, unwrapGoWS(err, q)
			}
			return fmt.Sprint(v), nil
		}
	}
	idle := func(ctx context.Context) (any, error) {
		time.Sleep(time.Second) // longer than the server's tick; the stream holds no transaction
		return "idle 1s", nil
	}
	step("drop child", exec("DROP TABLE IF EXISTS child"))
	step("drop parent", exec("DROP TABLE IF EXISTS parent"))
	step("create parent", exec("CREATE TABLE parent (id INTEGER PRIMARY KEY)"))
	step("create child", exec("CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id) ON DELETE CASCADE)"))
	step("rows", exec("INSERT INTO parent VALUES (1), (2)"))
	step("child rows", exec("INSERT INTO child VALUES (10, 1), (20, 2)"))
	step("foreign keys off", exec("PRAGMA foreign_keys=OFF"))
	step("idle after the pragma", idle)
	step("select 1", value("SELECT 1"))
	step("pragma still off", value("PRAGMA foreign_keys"))
	step("delete a parent, no cascade", exec("DELETE FROM parent WHERE id = 1"))
	step("children kept", value("SELECT count(*) FROM child"))
	step("temp table", exec("CREATE TEMP TABLE scratch (x)"))
	step("temp rows", exec("INSERT INTO scratch VALUES (40), (2)"))
	step("idle after the temp table", idle)
	step("temp table still there", value("SELECT sum(x) FROM scratch"))
	step("foreign keys on", exec("PRAGMA foreign_keys=ON"))
	step("orphan refused", exec("INSERT INTO child VALUES (30, 99)"))
	step("cascade", exec("DELETE FROM parent WHERE id = 2"))
	step("children left", value("SELECT group_concat(id) FROM child"))
	return out
}

// unwrapGoWS drops libsql-client-go's WebSocket wrapping of an error,
// "unable to execute SQL: ", which names the statement the step ran.
func unwrapGoWS(err error, q string) error {
	for _, verb := range []string{"execute", "query"} {
		if m, ok := strings.CutPrefix(err.Error(), "unable to "+verb+" "+q+": "); ok {
			return errors.New(m)
		}
	}
	return err
}
