package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicedb/sluice/internal/testenv"
)

// A restore's memory does not grow with the database: a database several
// times larger than the bound (a snapshot plus incremental files; rows are
// mostly zeros so building the replica stays quick) is restored from MinIO by `sluice restore` in a bound
// that would not even hold the database.
func TestRestorePeakMemoryIsBoundedBelowDatabaseSize(t *testing.T) {
	t.Parallel()
	const (
		rows     = 96_000 // of 3.2 KB, one per 4 KiB page: a 375 MB database
		padBytes = 3200
		bound    = 100 << 20 // peak RSS allowed for the restore process
	)
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	url := m.URL(bucket, "big")
	dir := t.TempDir()
	src := filepath.Join(dir, "big.db")

	db, err := sql.Open("sqlite", "file:"+src)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec1 := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec1("PRAGMA journal_mode=WAL")
	exec1("PRAGMA busy_timeout=10000") // the sidecar checkpoints meanwhile
	exec1("CREATE TABLE t (id INTEGER PRIMARY KEY, json TEXT, pad BLOB)")
	for done := 0; done < rows; done += 24_000 {
		exec1(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 24000)
			INSERT INTO t (json, pad) SELECT '{"n":' || i || '}', randomblob(64) || zeroblob(?) FROM n`, padBytes-64)
	}
	exec1("PRAGMA wal_checkpoint(TRUNCATE)")
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 3*bound {
		t.Fatalf("database is %d bytes, want at least 3x the %d-byte bound", fi.Size(), bound)
	}

	// Replicate it (a snapshot), then change pages all over it (incremental
	// files whose pages must win over the snapshot's).
	side := start(t, m.Env(), sluiceBin, "replicate", "-interval", "50ms", src, url)
	waitForLTX(t, m, bucket, "big", side)
	for i := 0; i < 5; i++ {
		exec1("UPDATE t SET pad = randomblob(?) WHERE id % 97 = ?", padBytes, i)
		time.Sleep(100 * time.Millisecond)
	}
	exec1("INSERT INTO t (json, pad) VALUES ('{\"last\":1}', randomblob(?))", padBytes)
	time.Sleep(300 * time.Millisecond)
	stopSidecar(t, side)

	out := filepath.Join(dir, "restored.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sluiceBin, "restore", "-q", "-o", out, url)
	cmd.Env = append(os.Environ(), m.Env()...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The process's own memory is its anonymous pages (heap, stacks, SQLite's
	// allocations); RSS also counts file pages it maps, which the kernel may
	// keep or drop as the machine's page cache allows.
	anon := make(chan int64, 1)
	go func() {
		var peak int64
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			b, err := os.ReadFile(status)
			if err != nil {
				anon <- peak
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
					var kb int64
					fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
					peak = max(peak, kb<<10)
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("restore: %v\n%s", err, logs.String())
	}
	peakAnon := <-anon
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	t.Logf("restored %d MB with a peak RSS of %d MB, of which anonymous (the process's own) %d MB", fi.Size()>>20, rss>>20, peakAnon>>20)
	if peakAnon > bound {
		// What to read the failure by: the replica's files, and the heap as
		// the collector saw it during the same restore run again.
		layout, _ := sluice(t, m.Env(), "ltx", url)
		again := exec.CommandContext(ctx, sluiceBin, "restore", "-q", "-o", out+".again", url)
		again.Env = append(os.Environ(), append(m.Env(), "GODEBUG=gctrace=1")...)
		trace, _ := again.CombinedOutput()
		if lines := strings.Split(strings.TrimSpace(string(trace)), "\n"); len(lines) > 15 {
			trace = []byte(strings.Join(lines[len(lines)-15:], "\n"))
		}
		t.Fatalf("restoring a %d MB database peaked at %d MB of anonymous memory (RSS %d MB), above the %d MB bound: restore memory grows with the database\nreplica:\n%s\nrestored again with gctrace (peak RSS %d MB):\n%s",
			fi.Size()>>20, peakAnon>>20, rss>>20, bound>>20, layout, again.ProcessState.SysUsage().(*syscall.Rusage).Maxrss>>10, trace)
	}

	// The restore is exact where incremental files overrode the snapshot.
	got, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	var integrity string
	if err := got.QueryRow("PRAGMA quick_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("quick_check of the restored database: %q, %v", integrity, err)
	}
	for _, id := range []int{1, 97, 195, 50_000, rows, rows + 1} {
		var a, b []byte
		if err := db.QueryRow("SELECT pad FROM t WHERE id = ?", id).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := got.QueryRow("SELECT pad FROM t WHERE id = ?", id).Scan(&b); err != nil {
			t.Fatalf("row %d missing from the restored database: %v", id, err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("row %d differs between the source and the restored database", id)
		}
	}
}

// waitForLTX waits until the replica holds an LTX file (the snapshot).
func waitForLTX(t *testing.T, m *testenv.MinIOServer, bucket, prefix string, side *process) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out, err := m.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
			Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
		if err == nil {
			for _, o := range out.Contents {
				if strings.HasSuffix(aws.ToString(o.Key), ".ltx") {
					return
				}
			}
		}
		select {
		case err := <-side.done:
			t.Fatalf("replicate exited: %v\n%s", err, side.out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("no LTX file under %s/%s/ after 90 s:\n%s", bucket, prefix, side.out.String())
}
