package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// fillDisk is an application that commits rows (the writer's table) until
// SQLite answers "database or disk is full", then exits 0 having printed
// how many it committed.
const fillDisk = `
import sqlite3, sys, json
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON, pad BLOB)")
n = 0
try:
    while True:
        db.execute("BEGIN")
        db.execute("INSERT INTO t (json, pad) VALUES (?, randomblob(2000))", (json.dumps({"n": n}),))
        db.execute("COMMIT")
        n += 1
except sqlite3.OperationalError as e:
    if "full" not in str(e):
        raise
    if db.in_transaction:
        db.execute("ROLLBACK")
print(n, flush=True)
`

// The application's disk fills up under the sidecar: every commit the
// application made is in the replica while the disk stays full, and with
// those made once there is room again when the sidecar exits 0; its log
// does not repeat the failing checkpoint.
func TestSidecarShipsEveryCommitAcrossAFullDisk(t *testing.T) {
	disk, resize := testenv.SmallDisk(t, "8m")
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "app")
	db := filepath.Join(disk, "app.db")

	fill := start(t, nil, "python3", "-c", fillDisk, db)
	time.Sleep(200 * time.Millisecond) // let the app create the database first
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "100ms", db, url)
	if err := fill.wait(t, time.Minute); err != nil {
		t.Fatalf("filling the disk: %v\n%s", err, fill.out.String())
	}
	committed := strings.TrimSpace(fill.out.String())
	if committed == "" || committed == "0" {
		t.Fatalf("the application committed nothing before the disk was full: %q", committed)
	}
	// While the disk stays full, every commit made reaches the replica (the
	// sidecar's own scratch space moves off the full disk).
	full := filepath.Join(t.TempDir(), "while-full.db")
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, f := range []string{full, full + "-wal", full + "-shm"} {
			_ = os.Remove(f) // an earlier try's copy, read while behind
		}
		var rows int64 = -1 // nothing restorable yet
		out, err := sluice(t, m.Env(), "restore", "-o", full, url)
		if err == nil {
			rows, _, _ = dbDigest(t, full)
		}
		if strconv.FormatInt(rows, 10) == committed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the disk full, the replica holds %d of the %s rows committed (restore: %v %s)\n%s", rows, committed, err, out, side.out.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second) // the sidecar polls on: checkpoints fail for want of room
	if n := strings.Count(side.out.String(), "automatic checkpoint failed"); n > 1 {
		t.Errorf("the failing checkpoint was logged %d times\n%s", n, side.out.String())
	}

	resize("64m")
	w := writer(t, db, 300, 3, 0)
	if err := w.wait(t, time.Minute); err != nil {
		t.Fatalf("writes after the disk has room again: %v\n%s", err, w.out.String())
	}
	stopSidecar(t, side)

	out := filepath.Join(t.TempDir(), "restored.db")
	mustSluice(t, m.Env(), "restore", "-integrity-check", "-o", out, url)
	n := sameDB(t, db, out)
	t.Logf("%s rows committed until the disk was full, %d in the restored copy (with 300 written after)", committed, n)
}
