package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The libsql crate in remote mode (testdata/clients/libsql-rust: a program
// that runs script.json's steps) against sluice, and the same steps on a
// local file through database/sql, printed in the same shape.

// rustStep is one step of script.json.
type rustStep struct {
	Step     string            `json:"step"`
	Kind     string            `json:"kind"` // exec, query, batch, tx
	SQL      string            `json:"sql"`
	Params   []json.RawMessage `json:"params"`
	SQLs     []string          `json:"sqls"`
	Rollback bool              `json:"rollback"`
}

const rustDir = "testdata/clients/libsql-rust"

// rustBuild builds the crate's programs (offline, in the target directory
// the deps script filled; a no-op when nothing changed) and returns the
// directory that holds them.
func rustBuild(t *testing.T) string {
	t.Helper()
	target := filepath.Join(toolsDir(), "cargo-target")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		home, _ := os.UserHomeDir()
		cargo = filepath.Join(home, ".cargo", "bin", "cargo") // rustup's, when not on PATH
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, cargo, "build", "--release", "--offline", "-q", "--target-dir", target)
	cmd.Dir = rustDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cargo build (offline; %s): %v\n%s", clientsInstallHint, err, lastLines(string(out), 30))
	}
	t.Logf("cargo build of the libsql crate programs: %s", time.Since(start).Round(100*time.Millisecond))
	return filepath.Join(target, "release")
}

// rustBuilt is where the programs are, built once per test binary.
var rustBuilt struct {
	sync.Once
	dir string
}

// rustProgram is the path of one of the crate's programs: the remote
// client (libsql-rust-conformance) or the embedded replica (replica).
func rustProgram(t *testing.T, name string) string {
	t.Helper()
	rustBuilt.Do(func() { rustBuilt.dir = rustBuild(t) })
	if rustBuilt.dir == "" {
		t.Fatal("the libsql crate programs did not build (see above)")
	}
	return filepath.Join(rustBuilt.dir, name)
}

// runRustClient is the crate's conformance run (a conformanceClient).
func runRustClient(t *testing.T, tg target) map[string]any {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(rustDir, "script.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tg.kind == "local" {
		return runRustScriptLocally(t, script, tg.file)
	}
	program := rustProgram(t, "libsql-rust-conformance")
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, program)
	cmd.Env = append(os.Environ(), "DB_URL="+tg.http, "SCRIPT="+script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := map[string]any{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var step map[string]any
		if err := json.Unmarshal([]byte(line), &step); err != nil {
			t.Fatalf("the libsql crate program printed a line that is not JSON: %v\n%s", err, line)
		}
		name, _ := step["step"].(string)
		delete(step, "step")
		if msg, ok := step["error"].(string); ok {
			step["error"] = rustMessage(msg)
		}
		out[name] = step
	}
	if runErr != nil {
		out["~exit"] = fmt.Sprintf("%v; stderr: %s", runErr, lastLines(stderr.String(), 8))
	}
	return out
}

// The crate wraps the server's error in "Hrana: stream error: Error {
// message: MSG, code: CODE }" (with backquotes, MSG quoted); the message is
// what SQLite said.
var rustWrap = regexp.MustCompile("^Hrana: `stream error: `Error \\{ message: (\".*\"), code: \"[A-Z_]+\" \\}``$")

func rustMessage(m string) string {
	if g := rustWrap.FindStringSubmatch(m); g != nil {
		if s, err := strconv.Unquote(g[1]); err == nil {
			return s
		}
	}
	return m
}

// runRustScriptLocally runs the steps on one connection to a local file and
// reports what the crate reports: changes only for INSERT, UPDATE and DELETE
// (as the server counts them), rows with each value's SQLite type.
func runRustScriptLocally(t *testing.T, script, file string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	var steps []rustStep
	if err := json.Unmarshal(raw, &steps); err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	type queryer interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}
	query := func(q queryer, text string, args []any) (any, error) {
		rows, err := q.QueryContext(ctx, text, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		out := []any{}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return nil, err
			}
			row := make([]any, len(cols))
			for i, v := range vals {
				row[i] = rustShow(v)
			}
			out = append(out, row)
		}
		return map[string]any{"columns": cols, "rows": out}, rows.Err()
	}
	out := map[string]any{}
	for _, st := range steps {
		var args []any
		for _, p := range st.Params {
			args = append(args, rustParam(t, p))
		}
		var v any
		var err error
		switch st.Kind {
		case "exec":
			var res sql.Result
			if res, err = db.ExecContext(ctx, st.SQL, args...); err == nil {
				v = int64(0)
				switch strings.ToUpper(strings.Fields(st.SQL)[0]) {
				case "INSERT", "UPDATE", "DELETE":
					v, _ = res.RowsAffected()
				}
			}
		case "query":
			v, err = query(db, st.SQL, args)
		case "batch":
			if _, err = db.ExecContext(ctx, st.SQL); err == nil {
				v = "done"
			}
		case "tx":
			v, err = func() (any, error) {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return nil, err
				}
				defer tx.Rollback()
				for _, q := range st.SQLs {
					if _, err := tx.ExecContext(ctx, q); err != nil {
						return nil, err
					}
				}
				n, err := query(tx, "SELECT count(*) AS n FROM logs", nil)
				if err != nil || st.Rollback {
					return n, err
				}
				return n, tx.Commit()
			}()
		default:
			t.Fatalf("%s: unknown step kind %q", script, st.Kind)
		}
		if err != nil {
			out[st.Step] = map[string]any{"error": sqliteMessage(err)}
		} else {
			out[st.Step] = map[string]any{"ok": v}
		}
	}
	return out
}

// rustParam reads a parameter as the program does: {"blob": HEX} is a blob.
func rustParam(t *testing.T, raw json.RawMessage) any {
	var blob struct{ Blob *string }
	if json.Unmarshal(raw, &blob) == nil && blob.Blob != nil {
		b, err := hex.DecodeString(*blob.Blob)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i
		}
		f, _ := n.Float64()
		return f
	}
	return v
}

// rustShow writes a value as the program does (Rust's {:?} for reals).
func rustShow(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int64:
		return fmt.Sprintf("integer:%d", x)
	case float64:
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return "real:" + s
	case string:
		return "text:" + x
	case []byte:
		return "blob:" + hex.EncodeToString(x)
	}
	return fmt.Sprintf("%T:%v", v, v)
}
