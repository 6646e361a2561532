package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// appScript is a tiny application: it inserts rows, then either exits with a
// code or, on SIGTERM, writes one last row and exits 0 (a graceful app).
const appScript = `
import sqlite3, sys, signal, time, os
path, rows, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
db = sqlite3.connect(path, timeout=30, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON, pad BLOB)")
print("count-at-start", db.execute("SELECT count(*) FROM t").fetchone()[0], flush=True)
for i in range(rows):
    db.execute("INSERT INTO t (json, pad) VALUES ('{}', randomblob(100))")
if mode.startswith("exit"):
    sys.exit(int(mode[4:]))
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
print("ready", flush=True)
while not stop:
    time.sleep(0.01)
db.execute("INSERT INTO t (json, pad) VALUES ('{\"last\":true}', randomblob(100))")
print("bye", flush=True)
`

func TestRunRestoresOnBootReplicatesAndKeepsExitCode(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(dir, "replica")

	// First boot: no database, no replica; the app writes 250 rows and exits 7.
	out, err := sluice(t, nil, "run", "-db", db, "-replica", rep, "-interval", "50ms", "--", "python3", "-c", appScript, db, "250", "exit7")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("sluice run should exit with the app's code 7, got %v\n%s", err, out)
	}
	if !strings.Contains(out, "count-at-start 0") {
		t.Fatalf("first boot should start empty:\n%s", out)
	}

	// The container is replaced: a fresh machine whose data folder does not
	// exist yet; the next boot creates it and restores the database.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(db + suffix)
	}
	db = filepath.Join(dir, "fresh", "data", "app.db")
	out = mustSluice(t, nil, "run", "-db", db, "-replica", rep, "--", "python3", "-c", appScript, db, "0", "exit0")
	if !strings.Contains(out, "count-at-start 250") {
		t.Fatalf("second boot did not restore the 250 rows:\n%s", out)
	}
	// The log says the restore began (with its size) before it says it ended.
	began, ended := strings.Index(out, `msg="restoring on boot"`), strings.Index(out, `msg="restored on boot"`)
	if began < 0 || ended < began {
		t.Fatalf("the boot log does not say the restore began before it ended:\n%s", out)
	}
}

func TestRunForwardsSignalsAndShipsTheLastWrite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(dir, "replica")

	p := start(t, nil, sluiceBin, "run", "-db", db, "-replica", rep, "-interval", "10s", "--", "python3", "-c", appScript, db, "100", "serve")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.out.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("app never became ready:\n%s", p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t, time.Minute); err != nil {
		t.Fatalf("sluice run after SIGTERM: %v\n%s", err, p.out.String())
	}
	if !strings.Contains(p.out.String(), "bye") {
		t.Fatalf("the app did not receive SIGTERM:\n%s", p.out.String())
	}

	// The interval is 10 s, so only the final ship can have carried the last row.
	out := filepath.Join(dir, "restored.db")
	mustSluice(t, nil, "restore", "-o", out, rep)
	if n := sameDB(t, db, out); n != 101 {
		t.Fatalf("restored %d rows, want 101 (100 + the row written on SIGTERM)", n)
	}
}
