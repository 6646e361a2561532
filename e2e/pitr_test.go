package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxTXID is the highest TXID among a file replica's LTX objects.
func maxTXID(t *testing.T, root string) uint64 {
	t.Helper()
	var max uint64
	for _, f := range ltxFiles(t, root) {
		name := strings.TrimSuffix(filepath.Base(f), ".ltx")
		parts := strings.Split(name, "-")
		v, err := strconv.ParseUint(parts[1], 16, 64)
		if err != nil {
			t.Fatalf("bad LTX name %s", f)
		}
		if v > max {
			max = v
		}
	}
	return max
}

func TestPointInTimeRestoreByTXIDAndTimestamp(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(dir, "replica")

	// Phase 1: 500 rows, shipped, then remember the position and the time.
	if err := writer(t, db, 500, 10, 0).wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	side := start(t, nil, sluiceBin, "replicate", "-interval", "50ms", db, rep)
	time.Sleep(300 * time.Millisecond)
	stopSidecar(t, side)
	txid1 := maxTXID(t, filepath.Join(dir, "replica"))
	time.Sleep(50 * time.Millisecond)
	t1 := time.Now().UTC()
	time.Sleep(1100 * time.Millisecond)

	// Phase 2: 700 more rows in many small transactions while replicating.
	side = start(t, nil, sluiceBin, "replicate", "-interval", "20ms", db, rep)
	if err := writer(t, db, 700, 7, 3*time.Millisecond).wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	stopSidecar(t, side)
	if got := maxTXID(t, filepath.Join(dir, "replica")); got <= txid1 {
		t.Fatalf("phase 2 shipped nothing: max TXID %d after %d", got, txid1)
	}

	count := func(path string) int64 { n, _, integrity := dbDigest(t, path); _ = integrity; return n }

	byTXID := filepath.Join(dir, "by-txid.db")
	mustSluice(t, nil, "restore", "-integrity-check", "full", "-txid", strconv.FormatUint(txid1, 10), "-o", byTXID, rep)
	if n := count(byTXID); n != 500 {
		t.Fatalf("restore -txid %d: %d rows, want 500", txid1, n)
	}

	byTime := filepath.Join(dir, "by-time.db")
	mustSluice(t, nil, "restore", "-integrity-check", "quick", "-timestamp", t1.Format(time.RFC3339Nano), "-o", byTime, rep)
	if n := count(byTime); n != 500 {
		t.Fatalf("restore -timestamp %s: %d rows, want 500", t1.Format(time.RFC3339Nano), n)
	}

	latest := filepath.Join(dir, "latest.db")
	mustSluice(t, nil, "restore", "-o", latest, rep)
	if n := sameDB(t, db, latest); n != 1200 {
		t.Fatalf("latest restore: %d rows, want 1200", n)
	}

	// A target the replica cannot reach is an error, not a shorter database.
	if out, err := sluice(t, nil, "restore", "-txid", "999999", "-o", filepath.Join(dir, "future.db"), rep); err == nil {
		t.Fatalf("restore to a TXID past the replica succeeded:\n%s", out)
	}
	if out, err := sluice(t, nil, "restore", "-timestamp", "2001-01-01T00:00:00Z", "-o", filepath.Join(dir, "past.db"), rep); err == nil {
		t.Fatalf("restore to a time before the replica succeeded:\n%s", out)
	}
}

func TestRestoreFlagsIfReplicaExistsAndIfDBNotExists(t *testing.T) {
	dir := t.TempDir()
	empty := "file://" + filepath.Join(dir, "empty")
	out := filepath.Join(dir, "x.db")
	if msg, err := sluice(t, nil, "restore", "-o", out, empty); err == nil {
		t.Fatalf("restore from an empty replica succeeded without -if-replica-exists:\n%s", msg)
	}
	mustSluice(t, nil, "restore", "-if-replica-exists", "-o", out, empty)

	db := filepath.Join(dir, "app.db")
	if err := writer(t, db, 10, 10, 0).wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	if msg, err := sluice(t, nil, "restore", "-o", db, empty); err == nil || !strings.Contains(msg, "exists") {
		t.Fatalf("restore over an existing database: err=%v\n%s", err, msg)
	}
	mustSluice(t, nil, "restore", "-if-db-not-exists", "-o", db, empty)
	if n, _, _ := dbDigest(t, db); n != 10 {
		t.Fatalf("existing database changed: %d rows", n)
	}
}
