package e2e

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	_ "modernc.org/sqlite"
)

// sluiceBin is the binary under test, built once per test process.
var sluiceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-e2e-")
	if err != nil {
		panic(err)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", sluiceBin, "../cmd/sluice")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	testenv.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sluice runs the binary to completion and returns its combined output.
func sluice(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustSluice is sluice that fails the test on a non-zero exit.
func mustSluice(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := sluice(t, env, args...)
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// process is a long-running child (sidecar, writer) whose output is kept for failures.
type process struct {
	cmd  *exec.Cmd
	out  *testenv.Output // safe to read while the child writes
	done chan error
}

func start(t *testing.T, env []string, name string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	buf := &testenv.Output{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{cmd: cmd, out: buf, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit, failing the test after timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		t.Fatalf("%s did not exit within %s; output:\n%s", p.cmd.Path, timeout, p.out.String())
		return nil
	}
}

// writer starts a separate process (Python's sqlite3, a real application)
// that inserts rows in small transactions and prints the last id it committed.
func writer(t *testing.T, dbPath string, rows, perTx int, pause time.Duration) *process {
	t.Helper()
	script := `
import sqlite3, sys, time, json, os
path, rows, per_tx, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
db = sqlite3.connect(path, timeout=30, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA busy_timeout=30000")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON, pad BLOB)")
done = 0
while done < rows:
    n = min(per_tx, rows - done)
    db.execute("BEGIN")
    for i in range(n):
        db.execute("INSERT INTO t (json, pad) VALUES (?, randomblob(200))",
                   (json.dumps({"age": 10, "name": "yamada", "class": "A", "n": done + i}),))
    db.execute("COMMIT")
    done += n
    if pause > 0:
        time.sleep(pause)
print(done, flush=True)
`
	return start(t, nil, "python3", "-c", script, dbPath, fmt.Sprint(rows), fmt.Sprint(perTx), fmt.Sprint(pause.Seconds()))
}

// dbDigest opens a database read-only and returns its row count, a hash of its
// content and the result of PRAGMA integrity_check.
func dbDigest(t *testing.T, path string) (rows int64, hash string, integrity string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil {
		t.Fatalf("integrity_check %s: %v", path, err)
	}
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&rows); err != nil {
		t.Fatalf("count %s: %v", path, err)
	}
	h := sha256.New()
	r, err := db.Query("SELECT id, json, hex(pad) FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var id int64
		var js, pad string
		if err := r.Scan(&id, &js, &pad); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%d|%s|%s\n", id, js, pad)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return rows, hex.EncodeToString(h.Sum(nil)), integrity
}

// sameDB fails the test unless both databases hold the same rows and pass integrity_check.
func sameDB(t *testing.T, want, got string) int64 {
	t.Helper()
	wn, wh, wi := dbDigest(t, want)
	gn, gh, gi := dbDigest(t, got)
	if wi != "ok" || gi != "ok" {
		t.Fatalf("integrity_check: source %q, restored %q", wi, gi)
	}
	if wn != gn || wh != gh {
		t.Fatalf("restored database differs: source %d rows (%s…), restored %d rows (%s…)", wn, wh[:12], gn, gh[:12])
	}
	return gn
}
