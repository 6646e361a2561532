package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
	"zombiezen.com/go/sqlite"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// buildSluice builds the sluice binary under test.
func buildSluice(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/sluice").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}

type serveProc struct {
	cmd  *exec.Cmd
	base string
	log  *testenv.Output
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, valid after done
}

func startServe(t *testing.T, bin string, env []string, args ...string) *serveProc {
	t.Helper()
	port := testenv.FreePort()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, append([]string{"serve", "-listen", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...) // AWS_CA_BUNDLE stays set: the S3 client must cope
	log := &testenv.Output{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, base: "http://" + addr, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.done })
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(p.base + "/health")
		if err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("sluice serve exited: %v\n%s", p.err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice serve did not answer /health: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func post(base, db, body string) (int, string, error) {
	resp, err := http.Post(base+"/v1/databases/"+db+"/query", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestServeBinaryKill9LosesNoAcknowledgedWrite is the durability promise
// itself: the real binary against MinIO, writes under load, kill -9, then the
// replica must hold every write that was answered 200.
func TestServeBinaryKill9LosesNoAcknowledgedWrite(t *testing.T) {
	minio := testenv.MinIO(t)
	bucket := minio.NewBucket(t)
	url := minio.URL(bucket, "srv")
	bin := buildSluice(t)
	data := t.TempDir()
	p := startServe(t, bin, minio.Env(), "-data", data, "-replica", url)
	if code, body, err := post(p.base, "default", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER, json JSON)"}`); err != nil || code != 200 {
		t.Fatalf("create table: %d %s %v", code, body, err)
	}
	var mu sync.Mutex
	acked := map[int]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := w*1_000_000 + i
				code, _, err := post(p.base, "default", fmt.Sprintf(`{"sql":"INSERT INTO t VALUES (?, ?, '{\"age\":10}')","params":[%d, %d]}`, id, w))
				if err != nil {
					return // the server was killed
				}
				if code == 200 {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	close(stop)
	wg.Wait()
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged before the kill; the test needs load\n%s", len(acked), p.log.String())
	}

	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "default"), out, restore.Options{IntegrityCheck: true}); err != nil {
		t.Fatalf("restore after kill -9: %v", err)
	}
	have := idsIn(t, out)
	missing := 0
	for id := range acked {
		if !have[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged writes are missing from the replica", missing, len(acked))
	}
	t.Logf("%d acknowledged writes, all in the replica (%d rows restored)", len(acked), len(have))

	// Restart with the data directory gone: the database comes back from the bucket.
	os.RemoveAll(data)
	p2 := startServe(t, bin, minio.Env(), "-data", data, "-replica", url)
	code, body, err := post(p2.base, "default", `{"sql":"SELECT count(*) FROM t"}`)
	if err != nil || code != 200 || !strings.Contains(body, fmt.Sprintf(`"rows":[[%d]]`, len(have))) {
		t.Fatalf("after restart from the bucket: %d %s %v (want %d rows)", code, body, err, len(have))
	}
	if code, body, _ := post(p2.base, "default", `{"sql":"INSERT INTO t(w) VALUES (-1)"}`); code != 200 {
		t.Fatalf("write after restore: %d %s", code, body)
	}
	// SIGTERM: graceful, exit 0.
	p2.terminate(t)
}

// terminate sends SIGTERM and requires exit 0 within 30 s: a graceful stop
// that shipped everything.
func (p *serveProc) terminate(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
	}
}

func idsIn(t *testing.T, path string) map[int]bool {
	t.Helper()
	c, err := sqlite.OpenConn(path, sqlite.OpenReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := c.Prep("SELECT id FROM t")
	ids := map[int]bool{}
	for {
		row, err := st.Step()
		if err != nil {
			t.Fatal(err)
		}
		if !row {
			break
		}
		ids[st.ColumnInt(0)] = true
	}
	return ids
}
