package suite

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica/file"
)

// compare on a short run across every target: sluice sync/async/local, the
// reference stack (go-sqlite3 + Litestream → MinIO), MariaDB and the file.
func TestCompareEveryTarget(t *testing.T) {
	for _, tool := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: run scripts/install-bench-deps.sh (Debian's mariadb-server)", tool)
		}
	}
	if _, err := exec.LookPath("litestream"); err != nil {
		t.Fatal("litestream not found: run scripts/install-test-deps.sh")
	}
	var out bytes.Buffer
	rows, err := Compare(context.Background(), CompareOptions{
		Scenario: "counter", VUs: 4, Duration: time.Second, Warmup: 200 * time.Millisecond,
		Sluice: sluiceBin, Bench: benchBin, Out: &out, JSON: filepath.Join(t.TempDir(), "compare.json"),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rows) != len(AllTargets) {
		t.Fatalf("%d rows, want %d\n%s", len(rows), len(AllTargets), out.String())
	}
	for i, r := range rows {
		if r.Report == nil || r.Report.Requests == 0 || r.Report.OK != r.Report.Requests {
			t.Fatalf("row %s: no clean run\n%s", r.Target, out.String())
		}
		if r.DBExact != "yes" {
			t.Errorf("row %s: the database does not hold exactly the acknowledged writes: %s", r.Target, r.DBExact)
		}
		switch AllTargets[i] {
		case "sluice-sync", "sluice-none":
			// Sync durability: every acknowledged write is in the replica, even after SIGKILL.
			if !r.Protected || r.Lost != 0 {
				t.Errorf("row %s: %s", r.Target, r.Survived)
			}
		case "sluice-async", "litestream":
			if !strings.HasPrefix(r.Survived, "yes") && !strings.HasPrefix(r.Survived, "NO: lost") {
				t.Errorf("row %s: restore not checked: %q", r.Target, r.Survived)
			}
		case "mariadb", "file":
			if r.Survived != "n/a (no replica)" {
				t.Errorf("row %s: %q", r.Target, r.Survived)
			}
		}
	}
	for _, want := range []string{"| target", "go-sqlite3 + Litestream", "MariaDB", "append-only file", "sluice sync → MinIO"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}

// bench serve on a short run of every row group: each row has figures,
// every write row's databases restored from MinIO hold exactly what they
// acknowledged, and each reference is printed beside its row.
func TestServeBenchmark(t *testing.T) {
	var out bytes.Buffer
	res, err := Serve(context.Background(), ServeOptions{
		Rows: ServeRowGroups, Duration: time.Second, Warmup: 200 * time.Millisecond, Sluice: sluiceBin, Bench: benchBin, Out: &out,
		ReadDuration: time.Second, ReadRounds: 1, ReadVUs: 4, Conns: []int{1, 4}, Databases: []int{1, 3}, WindowConns: 4, InsertVUs: 8,
		ProfileDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	groups := map[string]int{}
	for _, r := range res.Rows {
		groups[r.Group]++
		if r.Rate <= 0 || r.Failures != 0 {
			t.Errorf("row %q: %.0f req/s, %d failures\n%s", r.Name, r.Rate, r.Failures, out.String())
		}
		if r.Group != "read" && (!r.VerifyOK || r.Acked == 0 || r.PutsPer1k <= 0) {
			t.Errorf("row %q: verified %q, %d acknowledged, %.1f PUT/1k\n%s", r.Name, r.Verified, r.Acked, r.PutsPer1k, out.String())
		}
		if r.Group == "writes" && r.SluiceCPUPerUploadMS <= 0 {
			t.Errorf("row %q: no CPU per upload measured for sluice\n%s", r.Name, out.String())
		}
		if r.Group == "writes" && r.Databases == 3 && r.Conns == 4 && (r.StorePutsPerSec <= 0 || r.Target == "") {
			t.Errorf("row %q: the many-databases target row has no target or store ceiling (%.0f PUT/s)\n%s", r.Name, r.StorePutsPerSec, out.String())
		}
	}
	if groups["read"] != 3 || groups["writes"] != 4 || groups["latency"] != 1 || groups["window"] != 1 {
		t.Fatalf("rows per group %v, want read 3, writes 4, latency 1, window 1\n%s", groups, out.String())
	}
	if res.Insert == nil || res.Insert.Sluice.OK == 0 || res.Insert.Ceiling.OK == 0 || res.Insert.Litestream.OK == 0 {
		t.Fatalf("insert comparison missing or empty\n%s", out.String())
	}
	for _, want := range []string{"trivial handler, same", "bare cond. PUT of", "1 db, 4 conns:", "-commit-window 5ms",
		`bound of "insert, 1 db, 4 conns, -commit-window 5ms": a group holds at most one write per connection: at 4 connections the floor is 250.0 PUT/1k`,
		`bound of "read-100, Hrana, 4 conns": Hrana's answer is`, `bound of "insert, 3 dbs, 4 conns": 4 connections over 3 databases put at most 2 writes in one upload`,
		"bare conditional PUTs of", "in flight (sluice's upload bound):", "sluice / ceiling         ="} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}

// bench list on a file store: each count is listed in full, then cleaned up.
func TestListBenchmark(t *testing.T) {
	dir := t.TempDir()
	st, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rows, err := List(context.Background(), ListOptions{Store: st, Counts: []int{20, 100}, Parallel: []int{1, 4}, Runs: 2, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		if r.Failures != 0 || r.Listed != r.Objects || r.Median <= 0 {
			t.Fatalf("row %+v\n%s", r, out.String())
		}
	}
	left, err := st.List(context.Background(), "")
	if err != nil || len(left) != 0 {
		t.Fatalf("%d scratch objects left behind (%v)", len(left), err)
	}
}
