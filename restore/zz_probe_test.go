package restore

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore/restoretest"
)

func TestZZProbe(t *testing.T) {
	m := testenv.MinIO(t)
	url := m.URL(m.NewBucket(t), "db")
	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, store, t.TempDir())
	h.Script(`CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 468000)
		INSERT INTO t (json) SELECT '{"age":10, "name":"yamada", "class":"A"}' FROM n;`)
	h.Ship(t0)
	for i := 0; i < 40; i++ {
		h.Exec(`INSERT INTO t (json) VALUES ('x')`)
		h.Ship(t0.Add(time.Duration(i+1) * time.Second))
	}
	dir := t.TempDir()
	for i := range 5 {
		start := time.Now()
		cmd := exec.Command("/tmp/h-restore-sluice", "restore", "-v", "-q", "-o", filepath.Join(dir, "o"+string(rune('a'+i))+".db"), url)
		cmd.Env = append(os.Environ(), m.Env()...)
		out, err := cmd.CombinedOutput()
		t.Logf("%s\n%s %v", out, time.Since(start), err)
	}
}
