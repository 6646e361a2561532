package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// An application with one remote connection (PyPI libsql keeps one Hrana
// stream per connection) that queries less often than the server's stream
// idle timeout. Its connection goes on working after each pause, as long as
// the stream held nothing; a transaction left open across the pause is
// reported lost, and nothing of it is applied.
const idleApp = `
import sys, time, libsql
url, token, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
conn = libsql.connect(url, auth_token=token)
for i in range(3):
    print("read", conn.execute("SELECT count(*) FROM t").fetchone()[0], flush=True)
    time.sleep(pause)
conn.execute("INSERT INTO t VALUES ('begun before the pause')")  # DB-API: opens a transaction
time.sleep(pause)
try:
    conn.execute("INSERT INTO t VALUES ('after the pause')")
    conn.commit()
    print("committed across the pause", flush=True)
except Exception as e:
    print("refused:", e, flush=True)
`

func TestARemoteConnectionOutlivesIdlePauses(t *testing.T) {
	t.Parallel()
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	embeddedServe(t, m.Env(), t.TempDir(), m.URL(bucket, ""), host, "hrana: {idle-timeout: 500ms}")
	embCreate(t, host)
	embQuery(t, host, "CREATE TABLE t(v TEXT)")
	embQuery(t, host, "INSERT INTO t VALUES ('first')")

	script := filepath.Join(t.TempDir(), "idle_app.py")
	writeFile(t, filepath.Dir(script), filepath.Base(script), idleApp)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "python3", script, "http://"+host+"/db/app/", embRW, "1.5").CombinedOutput()
	t.Logf("the application, pausing 1.5 s (the stream idle timeout is 0.5 s):\n%s", out)
	if err != nil {
		t.Fatalf("the application failed: %v", err)
	}
	if got := strings.Count(string(out), "read 1\n"); got != 3 {
		t.Fatalf("%d of 3 reads after pauses answered; want every one", got)
	}
	if !strings.Contains(string(out), "refused:") || !strings.Contains(string(out), "STREAM_EXPIRED") {
		t.Fatalf("the transaction left open across the pause was not reported lost")
	}
	if rows := embQuery(t, host, "SELECT group_concat(v, '|') FROM t"); fmt.Sprint(rows) != "[[first]]" {
		t.Fatalf("rows: %v; nothing of the lost transaction may be applied", rows)
	}
}
