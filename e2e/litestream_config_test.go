package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicedb/sluice/internal/minioproc"
	"github.com/sluicedb/sluice/internal/testenv"
)

// writerScript is a small application: it inserts rows in transactions of
// five and exits, as the application run by exec: would.
const writerScript = `
import sqlite3, sys, time
path, rows = sys.argv[1], int(sys.argv[2])
db = sqlite3.connect(path, timeout=30, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA busy_timeout=30000")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, json JSON, pad BLOB)")
for i in range(0, rows, 5):
    db.execute("BEGIN")
    for j in range(5):
        db.execute("INSERT INTO t (json, pad) VALUES (?, randomblob(100))", ('{"n": %d}' % (i + j),))
    db.execute("COMMIT")
    time.sleep(0.002)
`

// Litestream's documented config shapes (testdata/litestream, in
// cmd/sluice) run unchanged against MinIO and a file replica: replicate
// with -config, then restore the Litestream way (DB_PATH found through
// $LITESTREAM_CONFIG), and the restored database is the original.
func TestConfigLitestreamExamplesReplicateAndRestore(t *testing.T) {
	m := testenv.MinIO(t)
	var user, password string
	for _, kv := range m.Env() {
		if v, ok := strings.CutPrefix(kv, "AWS_ACCESS_KEY_ID="); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(kv, "AWS_SECRET_ACCESS_KEY="); ok {
			password = v
		}
	}
	for _, c := range []struct {
		file    string
		creds   []string // how the example gets its credentials
		exec    bool     // the config runs the application itself
		inStore string   // what the replica's keys start with, in the bucket ("" for the file replica)
		output  []string // lines the sidecar must print
	}{
		{file: "s3-url.yml", creds: []string{"LITESTREAM_ACCESS_KEY_ID=" + user, "LITESTREAM_SECRET_ACCESS_KEY=" + password, "AWS_REGION=" + minioproc.Region}, inStore: "getting-started/app.db/"},
		{file: "s3-compatible.yml", inStore: "compatible/app.db/"},
		{file: "reference.yml", inStore: "reference/app.db/", output: []string{`"msg":"config: line 5: mcp-addr is accepted and not used`, `part-size is accepted and not used`}},
		{file: "file.yml"},
		{file: "exec.yml", exec: true},
	} {
		t.Run(strings.TrimSuffix(c.file, ".yml"), func(t *testing.T) {
			dir := t.TempDir()
			bucket := m.NewBucket(t)
			port, err := minioproc.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			script := filepath.Join(dir, "writer.py")
			if err := os.WriteFile(script, []byte(writerScript), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := filepath.Abs(filepath.Join("..", "cmd", "sluice", "testdata", "litestream", c.file))
			if err != nil {
				t.Fatal(err)
			}
			env := append([]string{
				"DATA_DIR=" + filepath.Join(dir, "data"), "BACKUP_DIR=" + filepath.Join(dir, "backup"),
				"BUCKET=" + bucket, "S3_ENDPOINT=" + m.Endpoint(), "MINIO_USER=" + user, "MINIO_PASSWORD=" + password,
				"STATUS_PORT=" + fmt.Sprint(port), "WRITER_SCRIPT=" + script,
				// Nothing but the example provides the credentials.
				"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=",
			}, c.creds...)
			if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, "data", "app.db")

			// The example is a config Litestream itself accepts.
			if _, err := exec.LookPath("litestream"); err != nil {
				t.Fatalf("litestream is not installed (scripts/install-test-deps.sh): %v", err)
			}
			ls := exec.Command("litestream", "databases", "-config", cfg)
			ls.Env = append(os.Environ(), env...)
			if out, err := ls.CombinedOutput(); err != nil || !strings.Contains(string(out), db) {
				t.Fatalf("litestream databases -config %s: %v\n%s", c.file, err, out)
			}

			var side *process
			if c.exec {
				side = start(t, env, sluiceBin, "replicate", "-config", cfg)
				if err := side.wait(t, 2*time.Minute); err != nil {
					t.Fatalf("replicate -config %s (exec): %v\n%s", c.file, err, side.out.String())
				}
			} else {
				app := start(t, nil, "python3", script, db, "400")
				time.Sleep(150 * time.Millisecond)
				side = start(t, env, sluiceBin, "replicate", "-config", cfg)
				if err := app.wait(t, time.Minute); err != nil {
					t.Fatalf("writer: %v\n%s", err, app.out.String())
				}
				time.Sleep(300 * time.Millisecond)
				stopSidecar(t, side)
			}
			for _, want := range c.output {
				if !strings.Contains(side.out.String(), want) {
					t.Errorf("sidecar output lacks %q:\n%s", want, side.out.String())
				}
			}
			if strings.Contains(side.out.String(), "unknown key") {
				t.Fatalf("a documented key was refused:\n%s", side.out.String())
			}
			if c.inStore != "" {
				keys := listKeys(t, m, bucket)
				if len(keys) == 0 || !strings.HasPrefix(keys[0], c.inStore) {
					t.Fatalf("bucket holds %q, want keys under %s", keys, c.inStore)
				}
			}

			out := filepath.Join(dir, "restored.db")
			restoreEnv := append(env, "LITESTREAM_CONFIG="+cfg)
			mustSluice(t, restoreEnv, "restore", db, "-o", out, "-q")
			if got := sameDB(t, db, out); got != 400 {
				t.Fatalf("restored %d rows, want 400", got)
			}
		})
	}
}

// listKeys lists every key of bucket, sorted.
func listKeys(t *testing.T, m *testenv.MinIOServer, bucket string) []string {
	t.Helper()
	out, err := m.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

// restore-if-db-not-exists: a replicate started on a machine without the
// database restores it first, then continues the replica.
func TestConfigRestoreIfDBNotExists(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := filepath.Join(t.TempDir(), "replica")
	cfg := filepath.Join(dir, "litestream.yml")
	body := "dbs:\n  - path: " + db + "\n    restore-if-db-not-exists: true\n    replica:\n      type: file\n      path: " + rep + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "writer.py")
	if err := os.WriteFile(script, []byte(writerScript), 0o644); err != nil {
		t.Fatal(err)
	}
	app := start(t, nil, "python3", script, db, "200")
	if err := app.wait(t, time.Minute); err != nil {
		t.Fatal(err)
	}
	side := start(t, []string{"LITESTREAM_CONFIG=" + cfg}, sluiceBin, "replicate", "-sync-interval", "50ms")
	time.Sleep(time.Second)
	stopSidecar(t, side)
	keep := filepath.Join(dir, "original.db")
	mustSluice(t, nil, "restore", "file://"+rep, "-o", keep, "-q")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(db + suffix)
	}

	side = start(t, []string{"LITESTREAM_CONFIG=" + cfg}, sluiceBin, "replicate", "-sync-interval", "50ms")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(side.out.String(), "restored on boot") {
		if time.Now().After(deadline) {
			t.Fatalf("no restore on start:\n%s", side.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopSidecar(t, side)
	if got := sameDB(t, keep, db); got != 200 {
		t.Fatalf("restored %d rows, want 200", got)
	}
}

// replicate -exec, as Litestream spells it on the command line: the
// application runs under the replicator, which stops and ships everything
// when it exits, with the application's exit code.
func TestConfigReplicateExecFlag(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "app.db")
	rep := "file://" + filepath.Join(t.TempDir(), "replica")
	script := filepath.Join(dir, "writer.py")
	if err := os.WriteFile(script, []byte(writerScript), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSluice(t, nil, "replicate", db, rep, "-sync-interval", "50ms", "-exec", "python3 '"+script+"' "+db+" 150")
	out := filepath.Join(dir, "restored.db")
	mustSluice(t, nil, "restore", rep, "-o", out, "-q")
	if got := sameDB(t, db, out); got != 150 {
		t.Fatalf("restored %d rows, want 150", got)
	}
	if _, err := sluice(t, nil, "replicate", filepath.Join(dir, "b.db"), rep+"-b", "-exec", "sh -c 'exit 7'"); err == nil {
		t.Fatal("the application's failure was not passed on")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("exit %v, want the application's 7", err)
	}
}
