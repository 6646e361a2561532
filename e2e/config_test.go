package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// `replicate -config` with two databases, Litestream's `replicas:` spelling
// for one of them and environment variables in the URLs.
func TestReplicateConfigWithTwoDatabases(t *testing.T) {
	dir := t.TempDir()
	dbA, dbB := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	cfg := filepath.Join(dir, "sluice.yml")
	err := os.WriteFile(cfg, []byte(`
sync-interval: 50ms
dbs:
  - path: `+dbA+`
    replica:
      url: file://${REPLICA_ROOT}/a
  - path: `+dbB+`
    replicas:
      - url: file://${REPLICA_ROOT}/b
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"REPLICA_ROOT=" + filepath.Join(dir, "replicas")}
	wA, wB := writer(t, dbA, 700, 7, time.Millisecond), writer(t, dbB, 500, 5, time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	side := start(t, env, sluiceBin, "replicate", "-config", cfg)
	for _, w := range []*process{wA, wB} {
		if err := w.wait(t, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	stopSidecar(t, side)

	for db, rep := range map[string]string{dbA: "a", dbB: "b"} {
		out := filepath.Join(dir, rep+"-restored.db")
		mustSluice(t, nil, "restore", "-o", out, "file://"+filepath.Join(dir, "replicas", rep))
		sameDB(t, db, out)
	}

	// A config naming no replica is refused with a clear message.
	bad := filepath.Join(dir, "bad.yml")
	_ = os.WriteFile(bad, []byte("dbs:\n  - path: "+dbA+"\n"), 0o644)
	if out, err := sluice(t, nil, "replicate", "-config", bad); err == nil {
		t.Fatalf("a database without a replica was accepted:\n%s", out)
	}
}
