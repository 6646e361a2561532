package e2e

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// What sluice leaves behind or changes without a word, as users meet it: a
// restore killed mid-way (a crash-looping `sluice run`), and an application
// database switched to WAL mode.

// restoreTemps lists the temp files of restores to out beside it.
func restoreTemps(t *testing.T, out string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".restore-*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKilledRestoreLeavesNoTempFileAfterTheNextRestore: kill -9 during a
// restore of a database large enough to take seconds leaves a temp file of a
// large part of its size; the next restore to the same path removes it and
// says so — three kills in a row leave one file, not three — and the restore
// that completes leaves none and puts the exact database in place.
func TestKilledRestoreLeavesNoTempFileAfterTheNextRestore(t *testing.T) {
	t.Parallel()
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "big")
	dir := t.TempDir()
	src := filepath.Join(dir, "app.db")
	// About 250 MB: big enough that a restore is still writing when killed.
	fill := start(t, nil, "python3", "-c", `
import sqlite3, sys, json
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON, pad BLOB)")
for b in range(100):
    db.execute("BEGIN")
    for i in range(2000):
        db.execute("INSERT INTO t (json, pad) VALUES (?, randomblob(1000))", (json.dumps({"n": b*2000+i}),))
    db.execute("COMMIT")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
`, src)
	if err := fill.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("fill: %v\n%s", err, fill.out.String())
	}
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms", src, url)
	waitUntil(t, 2*time.Minute, func() bool { return strings.Contains(side.out.String(), "empty replica") }, side)
	stopSidecar(t, side)

	out := filepath.Join(dir, "restored", "app.db")
	srcInfo, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	// Each killed restore leaves its temp file; the next one removes the
	// earlier one's (a crash loop keeps at most one, not one per attempt).
	var left []string
	var leftBytes int64
	for kill := 1; kill <= 3; kill++ {
		before := map[string]bool{}
		for _, p := range restoreTemps(t, out) {
			before[p] = true
		}
		r := start(t, m.Env(), sluiceBin, "restore", "-o", out, url)
		// Kill once its own temp file holds a tenth of the database: mid-write.
		begin := time.Now()
		var mine string
		for mine == "" {
			for _, p := range restoreTemps(t, out) {
				if fi, err := os.Stat(p); err == nil && !before[p] && fi.Size() >= srcInfo.Size()/10 {
					mine = p
				}
			}
			if r.cmd.ProcessState != nil || time.Since(begin) > time.Minute {
				t.Fatalf("restore %d finished or stalled before it could be killed mid-way; output:\n%s", kill, r.out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(begin)
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		_ = r.wait(t, 10*time.Second)
		left = restoreTemps(t, out)
		if len(left) != 1 || left[0] != mine {
			t.Fatalf("after kill %d: temp files %v, want only the killed restore's own %s", kill, left, mine)
		}
		for p := range before {
			if !strings.Contains(r.out.String(), p) {
				t.Errorf("restore %d removed %s without saying so; output:\n%s", kill, p, r.out.String())
			}
		}
		fi, _ := os.Stat(mine)
		leftBytes = fi.Size()
		t.Logf("kill %d: restore killed %s after it started, %d MB written; temp files left: %d", kill, took.Round(time.Millisecond), leftBytes>>20, len(left))
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a killed restore put %s in place (stat: %v)", out, err)
	}

	start := time.Now()
	logs := mustSluice(t, m.Env(), "restore", "-o", out, url)
	t.Logf("full restore of %d MB took %s; it removed %d leftover bytes", srcInfo.Size()>>20, time.Since(start).Round(time.Millisecond), leftBytes)
	if got := restoreTemps(t, out); len(got) != 0 {
		t.Fatalf("temp files left after the next restore: %v", got)
	}
	for _, p := range left {
		if !strings.Contains(logs, p) {
			t.Errorf("the restore's output does not name the leftover it removed, %s:\n%s", p, logs)
		}
	}
	if n := sameDB(t, src, out); n != 200000 {
		t.Fatalf("restored %d rows, want 200000", n)
	}
}

// TestReplicateSaysOnceItSwitchedTheDatabaseToWAL: an application's database
// in journal_mode=DELETE is switched to WAL (sluice reads commits from the
// WAL); the sidecar says so in one line naming the mode it had, and a
// restart, which finds WAL already, says nothing more.
func TestReplicateSaysOnceItSwitchedTheDatabaseToWAL(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	db := filepath.Join(t.TempDir(), "app.db")
	c, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA journal_mode=DELETE", "CREATE TABLE t (id INTEGER PRIMARY KEY)", "INSERT INTO t VALUES (1)"} {
		if _, err := c.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	const line = "switched the database to WAL mode"
	for run := 1; run <= 2; run++ {
		side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms", db, url)
		waitUntil(t, time.Minute, func() bool {
			s := side.out.String()
			return strings.Contains(s, "empty replica") || strings.Contains(s, "database matches the replica")
		}, side)
		stopSidecar(t, side)
		got := strings.Count(side.out.String(), line)
		want := map[int]int{1: 1, 2: 0}[run]
		if got != want {
			t.Fatalf("run %d: %d lines %q, want %d; output:\n%s", run, got, line, want, side.out.String())
		}
		if run == 1 && !strings.Contains(side.out.String(), "journal_mode_was=DELETE") {
			t.Fatalf("the line does not name the mode the application had; output:\n%s", side.out.String())
		}
	}
	c, err = sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mode string
	if err := c.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode after replicate: %q (%v), want wal", mode, err)
	}
}
