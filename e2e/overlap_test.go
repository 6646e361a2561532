package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
)

// Overlapping deploys with the shipped examples' own flags: the second
// instance starts while the first takes counter increments, the first is
// stopped a few seconds later. Increments and reads go to both.

// overlapRunsDefault is how many overlaps each example gets in `make test`
// (about 10 s each under contention); SLUICE_OVERLAP_RUNS=20 runs more.
const overlapRunsDefault = 4

func overlapRuns(t *testing.T) int {
	if s := os.Getenv("SLUICE_OVERLAP_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_OVERLAP_RUNS=%q: give a positive count", s)
		}
		return n
	}
	return overlapRunsDefault
}

// cpuContention runs two busy loops beside the test, as on a loaded machine.
func cpuContention(t *testing.T) {
	for i := 0; i < 2; i++ {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
}

const overlapToken = "overlap-test-token"

// instance is one started example: where its clients send increments and
// reads, and the process behind it.
type instance struct {
	name string
	base string // the application's (or sluice serve's) HTTP base
	data string
	cmd  *exec.Cmd
	log  *testenv.Output
	done chan struct{}
	err  error
	// inc and read answer (value, status, retryAfter, err).
	inc, read func(ctx context.Context) (int64, int, string, error)
}

func startProc(t *testing.T, name string, env []string, args ...string) *instance {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &testenv.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{name: name, cmd: cmd, log: out, done: make(chan struct{})}
	go func() { in.err = cmd.Wait(); close(in.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-in.done })
	return in
}

func (in *instance) running() bool {
	select {
	case <-in.done:
		return false
	default:
		return true
	}
}

// terminate sends SIGTERM and waits for a clean exit.
func (in *instance) terminate(t *testing.T) {
	t.Helper()
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60s of SIGTERM\n%s", in.name, in.log.String())
	}
	if in.err != nil {
		t.Fatalf("%s exited with %v after SIGTERM\n%s", in.name, in.err, in.log.String())
	}
}

var overlapClient = &http.Client{Timeout: 60 * time.Second}

// serveCalls gives in the JSON API's increment and read of the counter.
func serveCalls(in *instance) {
	query := func(ctx context.Context, sql string) (int64, int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", in.base+"/v1/databases/default/query",
			strings.NewReader(`{"sql":`+strconv.Quote(sql)+`}`))
		req.Header.Set("Authorization", "Bearer "+overlapToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := overlapClient.Do(req)
		if err != nil {
			return 0, 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return 0, resp.StatusCode, resp.Header.Get("Retry-After"), fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		var out struct {
			Results []struct {
				Rows [][]json.Number `json:"rows"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Results) == 0 || len(out.Results[0].Rows) == 0 {
			return 0, 200, "", fmt.Errorf("unexpected answer %s", body)
		}
		n, err := out.Results[0].Rows[0][0].Int64()
		return n, 200, "", err
	}
	in.inc = func(ctx context.Context) (int64, int, string, error) {
		return query(ctx, "UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n")
	}
	in.read = func(ctx context.Context) (int64, int, string, error) {
		return query(ctx, "SELECT n FROM counters WHERE id = 1")
	}
}

// appCalls gives in the counter application's increment and read.
func appCalls(in *instance) {
	call := func(ctx context.Context, method, path string) (int64, int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, method, in.base+path, nil)
		resp, err := overlapClient.Do(req)
		if err != nil {
			return 0, 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return 0, resp.StatusCode, resp.Header.Get("Retry-After"), fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
		return n, 200, "", err
	}
	in.inc = func(ctx context.Context) (int64, int, string, error) { return call(ctx, "POST", "/inc") }
	in.read = func(ctx context.Context) (int64, int, string, error) { return call(ctx, "GET", "/count") }
}

// counterApp is the application of the Kubernetes example: it serves
// increments of a counter in its SQLite database, one request at a time,
// and finishes the request in hand on SIGTERM.
const counterApp = `
import os, signal, sqlite3, sys
from http.server import HTTPServer, BaseHTTPRequestHandler
db = sqlite3.connect(os.environ["COUNTER_DB"], isolation_level=None, timeout=30)
db.execute("PRAGMA busy_timeout=30000")
db.execute("CREATE TABLE IF NOT EXISTS counters(id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
db.execute("INSERT OR IGNORE INTO counters VALUES (1, 0)")
stop = False
def term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, term)
class H(BaseHTTPRequestHandler):
    def answer(self, n):
        b = str(n).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_POST(self):
        self.answer(db.execute("UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n").fetchone()[0])
    def do_GET(self):
        self.answer(db.execute("SELECT n FROM counters WHERE id = 1").fetchone()[0])
    def log_message(self, *a):
        pass
s = HTTPServer(("127.0.0.1", int(os.environ["COUNTER_PORT"])), H)
s.timeout = 0.1
while not stop:
    s.handle_request()
s.server_close()
db.close()
`

// exampleArgs returns the one sluice command line of a deploy example.
func exampleArgs(t *testing.T, file string) []string {
	t.Helper()
	found := sluiceInvocations(t)[file]
	if len(found) != 1 {
		t.Fatalf("%s: want one sluice command line, found %q", file, found)
	}
	return append([]string(nil), found[0]...)
}

// substitute rewrites an example's command line for this machine: the
// data directory, database path, replica and listen port become local
// ones, $(VAR) references take env's values; every other flag stays.
func substitute(args []string, data, replicaURL string, port int, env map[string]string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		out = append(out, os.Expand(strings.NewReplacer("$(", "${", ")", "}").Replace(a), func(k string) string { return env[k] }))
		if i+1 >= len(args) {
			continue
		}
		switch a {
		case "-data":
			out = append(out, data)
			i++
		case "-db":
			out = append(out, filepath.Join(data, filepath.Base(args[i+1])))
			i++
		case "-replica":
			out = append(out, replicaURL)
			i++
		case "-addr", "-listen":
			out = append(out, "127.0.0.1:"+strconv.Itoa(port))
			i++
		}
	}
	return out
}

// overlapExample starts the n-th instance of one deploy example.
type overlapExample struct {
	name  string
	serve bool // sluice serve: its own lease hand-over; else a sidecar waiting for the lease
	start func(t *testing.T, idx int, replicaURL string, extra []string) *instance
}

func waitHTTP(t *testing.T, in *instance, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if !in.running() || time.Now().After(deadline) {
			t.Fatalf("%s never answered at %s (%v)\n%s", in.name, url, in.err, in.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func overlapExamples(t *testing.T, env []string) []overlapExample {
	vars := map[string]string{"SLUICE_TOKEN": overlapToken}
	env = append(env, "SLUICE_TOKEN="+overlapToken, "BUCKET_NAME=unused")
	cloudRun := exampleArgs(t, "../deploy/cloudrun/serve.yaml")
	fly := exampleArgs(t, "fly.toml")
	k8s := exampleArgs(t, "../deploy/kubernetes/deployment.yaml")
	return []overlapExample{
		{name: "cloudrun", serve: true, start: func(t *testing.T, idx int, url string, extra []string) *instance {
			data, port := t.TempDir(), testenv.FreePort()
			// Cloud Run says the port in $PORT; the example sets no -addr.
			args := append(substitute(cloudRun, data, url, port, vars), extra...)
			in := startProc(t, fmt.Sprintf("cloudrun-%d", idx), append(env, "PORT="+strconv.Itoa(port)), args...)
			in.base, in.data = "http://127.0.0.1:"+strconv.Itoa(port), data
			serveCalls(in)
			waitHTTP(t, in, in.base+"/health")
			return in
		}},
		{name: "fly", serve: true, start: func(t *testing.T, idx int, url string, extra []string) *instance {
			data, port := t.TempDir(), testenv.FreePort()
			args := append([]string(nil), fly...)
			// The config file the example ships, with this machine's paths.
			raw, err := os.ReadFile("../deploy/fly/sluice.yml")
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["data"], cfg["addr"], cfg["replica"] = data, "127.0.0.1:"+strconv.Itoa(port), url
			out, _ := yaml.Marshal(cfg)
			path := filepath.Join(t.TempDir(), "sluice.yml")
			if err := os.WriteFile(path, out, 0o600); err != nil {
				t.Fatal(err)
			}
			for i := range args {
				if args[i] == "-config" && i+1 < len(args) {
					args[i+1] = path
				}
			}
			in := startProc(t, fmt.Sprintf("fly-%d", idx), env, append(args, extra...)...)
			in.base, in.data = "http://127.0.0.1:"+strconv.Itoa(port), data
			serveCalls(in)
			waitHTTP(t, in, in.base+"/health")
			return in
		}},
		{name: "kubernetes", start: func(t *testing.T, idx int, url string, extra []string) *instance {
			data, port, appPort := t.TempDir(), testenv.FreePort(), testenv.FreePort()
			app := filepath.Join(t.TempDir(), "counter.py")
			if err := os.WriteFile(app, []byte(counterApp), 0o644); err != nil {
				t.Fatal(err)
			}
			args := substitute(k8s, data, url, port, vars)
			for i, a := range args {
				if a == "--" { // the application: the counter
					args = append(args[:i+1], "python3", app)
					break
				}
			}
			dbPath := ""
			for i, a := range args {
				if a == "-db" {
					dbPath = args[i+1]
				}
			}
			full := append(append(append([]string(nil), args[0]), extra...), args[1:]...)
			in := startProc(t, fmt.Sprintf("kubernetes-%d", idx), append(env, "COUNTER_PORT="+strconv.Itoa(appPort), "COUNTER_DB="+dbPath), full...)
			in.base, in.data = "http://127.0.0.1:"+strconv.Itoa(appPort), data
			appCalls(in)
			waitHTTP(t, in, "http://127.0.0.1:"+strconv.Itoa(port)+"/health")
			return in
		}},
	}
}

// outcome is one answer a client got.
type outcome struct {
	inst       string
	inc        bool
	v          int64
	status     int // 0: transport error
	retryAfter string
	err        error
	sent, got  time.Time
}

// drive sends increments (4 in 5) and reads to the instances targets
// returns, round robin, from 6 clients, until stop.
func drive(targets func() []*instance, stop <-chan struct{}) func() []outcome {
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ts := targets()
				in := ts[i%len(ts)]
				o := outcome{inst: in.name, inc: i%5 != 0, sent: time.Now()}
				call := in.inc
				if !o.inc {
					call = in.read
				}
				o.v, o.status, o.retryAfter, o.err = call(context.Background())
				o.got = time.Now()
				mu.Lock()
				all = append(all, o)
				mu.Unlock()
				if o.err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	return func() []outcome { wg.Wait(); return all }
}

func restoredCounter(t *testing.T, url, db string) int64 {
	t.Helper()
	store, err := replicaurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if db != "" {
		store = replica.Sub(store, db)
	}
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), store, out, restore.Options{}); err != nil {
		t.Fatalf("fresh restore: %v", err)
	}
	return queryInt(t, out, "SELECT n FROM counters WHERE id = 1")
}

func queryInt(t *testing.T, path, q string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s on %s: %v", q, path, err)
	}
	return n
}

// holderPID returns the pid in the lease holder's id (host-pid-random).
func holderPID(ctx context.Context, store replica.Store) (int, lease.Record) {
	rec, _, err := lease.Read(ctx, store)
	if err != nil || rec.Released() {
		return 0, rec
	}
	m := regexp.MustCompile(`-(\d+)-[0-9a-f]+$`).FindStringSubmatch(rec.Holder)
	if m == nil {
		return 0, rec
	}
	pid, _ := strconv.Atoi(m[1])
	return pid, rec
}

type overlapStats struct {
	acks, failures, retryable, transport int
	takeover                             time.Duration
}

// overlapOnce runs one overlap of ex and checks what every client saw.
func overlapOnce(t *testing.T, m *testenv.MinIOServer, ex overlapExample, run int, extra []string) overlapStats {
	url := m.URL(m.NewBucket(t), "app")
	a := ex.start(t, 2*run, url, extra)
	if ex.serve { // the counter, through the first instance
		if _, _, _, err := func() (int64, int, string, error) {
			in := *a
			serveCalls(&in)
			req, _ := http.NewRequest("POST", a.base+"/v1/databases/default/query", strings.NewReader(
				`{"batch":[{"sql":"CREATE TABLE counters(id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"},{"sql":"INSERT INTO counters VALUES (1, 0)"}]}`))
			req.Header.Set("Authorization", "Bearer "+overlapToken)
			resp, err := overlapClient.Do(req)
			if err != nil {
				return 0, 0, "", err
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				return 0, resp.StatusCode, "", fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			return 0, 200, "", nil
		}(); err != nil {
			t.Fatalf("create the counter on %s: %v\n%s", a.name, err, a.log.String())
		}
	} else {
		waitHTTP(t, a, a.base+"/count")
	}
	var tmu sync.Mutex
	targets := []*instance{a}
	stop := make(chan struct{})
	collect := drive(func() []*instance { tmu.Lock(); defer tmu.Unlock(); return targets }, stop)
	time.Sleep(time.Second)
	b := ex.start(t, 2*run+1, url, extra)
	bStarted := time.Now()
	tmu.Lock()
	targets = []*instance{a, b}
	tmu.Unlock()
	var st overlapStats
	if ex.serve {
		// The newer instance must become the writer without a SIGTERM of
		// the older one.
		store, err := replicaurl.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		for {
			pid, _ := holderPID(context.Background(), replica.Sub(store, "default"))
			if pid == b.cmd.Process.Pid {
				st.takeover = time.Since(bStarted)
				break
			}
			if time.Since(bStarted) > 30*time.Second {
				close(stop)
				collect()
				t.Fatalf("run %d: the newer instance did not become the writer within 30s of taking requests\n--- %s:\n%s\n--- %s:\n%s",
					run, a.name, a.log.String(), b.name, b.log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Second)
	} else {
		time.Sleep(3 * time.Second)
	}
	a.terminate(t)
	aExited := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	outcomes := collect()

	// Judge every answer.
	acked := map[int64]outcome{}
	bAfterExit := 0
	var reads []outcome
	for _, o := range outcomes {
		switch {
		case o.err == nil && o.inc:
			if prev, dup := acked[o.v]; dup {
				t.Fatalf("run %d: count %d acknowledged twice (by %s and %s): two writers applied increments to forked states", run, o.v, prev.inst, o.inst)
			}
			acked[o.v] = o
			if o.inst == b.name && o.sent.After(aExited) {
				bAfterExit++
			}
		case o.err == nil:
			reads = append(reads, o)
		case o.status == 0:
			st.transport++ // not answered: an instance not listening yet or any more
		case o.status == 503 && o.retryAfter != "":
			st.retryable++
		default:
			t.Errorf("run %d: %s answered a non-retryable error (the client cannot know what happened): %v", run, o.inst, o.err)
		}
	}
	st.acks = len(acked)
	st.failures = st.transport + st.retryable
	var final, viaB int64
	if ex.serve {
		// The surviving instance agrees with a fresh restore.
		final = restoredCounter(t, url, "default")
		for deadline := time.Now().Add(10 * time.Second); ; {
			n, _, _, err := b.read(context.Background())
			if err == nil && n == final {
				viaB = n
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: %s reads %d (%v), a fresh restore %d", run, b.name, n, err, final)
			}
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		// A sidecar ships on an interval: its last commits reach the
		// bucket when it stops.
		n, _, _, err := b.read(context.Background())
		for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond) // still restoring after the lease came free
			n, _, _, err = b.read(context.Background())
		}
		if err != nil {
			t.Fatalf("run %d: final read on %s: %v\n--- %s:\n%s\n--- %s:\n%s", run, b.name, err, a.name, a.log.String(), b.name, b.log.String())
		}
		viaB = n
		b.terminate(t)
		if final = restoredCounter(t, url, ""); final != viaB {
			t.Errorf("run %d: %s read %d before it stopped, a fresh restore %d", run, b.name, viaB, final)
		}
	}
	if final != int64(len(acked)) {
		t.Errorf("run %d: counter %d (restored, and %d through %s) but %d increments acknowledged (%d unanswered, %d retryable)",
			run, final, viaB, b.name, len(acked), st.transport, st.retryable)
	}
	for v := range acked {
		if v > final {
			t.Errorf("run %d: count %d acknowledged, the counter is %d: an acknowledged increment was lost", run, v, final)
		}
	}
	for _, r := range reads {
		if r.v == 0 {
			continue
		}
		ack, ok := acked[r.v]
		if !ok || !ack.sent.Before(r.got) {
			t.Errorf("run %d: a read on %s returned %d, which no increment sent before it was acknowledged with (ok=%v): a read of data not in the bucket",
				run, r.inst, r.v, ok)
		}
	}
	if bAfterExit == 0 {
		t.Errorf("run %d: %s took no write after %s exited\n--- %s:\n%s", run, b.name, a.name, b.name, b.log.String())
	}
	for _, in := range []*instance{a, b} {
		if left, _ := filepath.Glob(filepath.Join(in.data, "*diverged*")); len(left) > 0 {
			t.Errorf("run %d: %s left %v", run, in.name, left)
		}
		if strings.Contains(in.log.String(), "fenced") && ex.serve {
			t.Logf("run %d: %s logged a fence:\n%s", run, in.name, in.log.String())
		}
	}
	if t.Failed() {
		t.Fatalf("--- %s:\n%s\n--- %s:\n%s", a.name, a.log.String(), b.name, b.log.String())
	}
	if ex.serve {
		b.terminate(t)
	}
	return st
}

func TestOverlappingDeploysWithTheExamplesFlags(t *testing.T) {
	m := testenv.MinIO(t)
	cpuContention(t)
	runs := overlapRuns(t)
	for _, ex := range overlapExamples(t, m.Env()) {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel() // the examples overlap each other too: more contention, same judgments
			var total overlapStats
			var takeovers []time.Duration
			start := time.Now()
			for run := 0; run < runs; run++ {
				var extra []string
				if ex.name == "cloudrun" && run%2 == 1 {
					// Cloud Run revisions cannot reach each other: nothing
					// is forwarded, the newer one still takes over.
					extra = []string{"-advertise", "http://127.0.0.1:9"}
				}
				st := overlapOnce(t, m, ex, run, extra)
				total.acks += st.acks
				total.retryable += st.retryable
				total.transport += st.transport
				if ex.serve {
					takeovers = append(takeovers, st.takeover)
				}
			}
			sort.Slice(takeovers, func(i, j int) bool { return takeovers[i] < takeovers[j] })
			t.Logf("%s: %d overlaps in %s: %d increments acknowledged = counter = restored; %d answered 503 + Retry-After, %d unanswered (instance not listening); newer instance writer after %v",
				ex.name, runs, time.Since(start).Round(time.Second), total.acks, total.retryable, total.transport, takeovers)
		})
	}
}
