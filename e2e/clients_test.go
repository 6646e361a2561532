package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// The client conformance suite: each stock libSQL client and ORM runs the
// same script against `sluice serve -durability sync` (replicating to MinIO)
// and against a local SQLite file through the same client, and the two must
// give the same results. Every script runs twice against the same database,
// as an application re-running its migrations would.

// target is where one run of a client script points.
type target struct {
	kind  string // "sluice" or "local"
	http  string // Hrana over HTTP: http://127.0.0.1:PORT/db/NAME/ or file:/abs/path.db
	ws    string // Hrana over WebSocket: ws://127.0.0.1:PORT/db/NAME/ or file:/abs/path.db
	file  string // local: the database file; sluice: ""
	host  string // sluice: 127.0.0.1:PORT
	db    string // database name on sluice
	work  string // a scratch directory for this run (generated files, configs)
	runNo int
}

// conformanceClient is one client or ORM: run executes its script and returns
// the outcome of each named step.
type conformanceClient struct {
	name string
	run  func(t *testing.T, tg target) map[string]any
}

func TestClientConformance(t *testing.T) {
	t.Parallel()
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	port := testenv.FreePort()
	host := fmt.Sprintf("127.0.0.1:%d", port)
	data := t.TempDir()
	p := start(t, m.Env(), sluiceBin, "serve", "-durability", "sync", "-data", data,
		"-replica", m.URL(bucket, ""), "-listen", host)
	waitUntil(t, 60*time.Second, func() bool { return readyCode("http://"+host+"/ready") == 200 }, p)

	clients := []conformanceClient{
		{"libsql-client-js", nodeScript("libsql-client-js/run.js")},
		{"libsql-client-js-isolation", nodeScript("libsql-client-js-isolation/run.js")},
		{"drizzle", nodeScript("drizzle/run.js")},
		{"kysely", nodeScript("kysely/run.js")},
		{"libsql-client-go", runGoClient},
		{"sqlalchemy-libsql", pythonScript("sqlalchemy/run.py")},
		{"libsql-client-py", pythonScript("libsql-client-py/run.py")},
		{"libsql-client-go-ws", runGoClientWS},
		{"libsql-py", pythonScript("libsql-py/run.py")},
		{"django-libsql", pythonScript("django/run.py")},
		{"libsql-rust", runRustClient},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			db := strings.ReplaceAll(c.name, "-", "_")
			createDatabase(t, "http://"+host, db)
			dir := t.TempDir()
			local := filepath.Join(dir, "local.db")
			for run := 1; run <= 2; run++ {
				want := c.run(t, target{kind: "local", http: "file:" + local, ws: "file:" + local, file: local,
					work: mkdir(t, dir, fmt.Sprintf("local%d", run)), runNo: run})
				got := c.run(t, target{kind: "sluice", http: "http://" + host + "/db/" + db + "/", ws: "ws://" + host + "/db/" + db + "/",
					host: host, db: db, work: mkdir(t, dir, fmt.Sprintf("sluice%d", run)), runNo: run})
				t.Logf("run %d: %d steps, %d as on a local file", run, len(want), len(want)-countDiffs(want, got))
				if diff := diffSteps(want, got); diff != "" {
					t.Errorf("run %d: sluice differs from a local file with the same client:%s", run, diff)
				}
			}
			// Every write the clients were answered for is in the bucket.
			restored := filepath.Join(dir, "restored.db")
			mustSluice(t, m.Env(), "restore", "-o", restored, m.URL(bucket, db))
			if served, got := tablesDigest(t, filepath.Join(data, db+".db")), tablesDigest(t, restored); served != got {
				t.Errorf("the replica in MinIO differs from the served database:\nserved:   %s\nrestored: %s", served, got)
			}
		})
	}
	if t.Failed() {
		t.Logf("sluice serve output:\n%s", lastLines(p.out.String(), 40))
	}
}

// tablesDigest lists each table with its row count and a hash of its rows.
func tablesDigest(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	var b strings.Builder
	for _, name := range tables {
		r, err := db.Query(`SELECT * FROM "` + strings.ReplaceAll(name, `"`, `""`) + `" ORDER BY rowid`)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cols, _ := r.Columns()
		h := sha256.New()
		n := 0
		for r.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := r.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%v\n", vals)
			n++
		}
		r.Close()
		fmt.Fprintf(&b, "%s:%d:%x ", name, n, h.Sum(nil)[:6])
	}
	return b.String()
}

func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func createDatabase(t *testing.T, base, name string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", base+"/v1/databases/"+name, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create database %s: HTTP %d", name, resp.StatusCode)
	}
}

// toolsDir holds the pinned npm and pip clients (scripts/install-test-deps.sh).
func toolsDir() string {
	if d := os.Getenv("SLUICE_TOOLS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sluice-tools")
}

const clientsInstallHint = "run scripts/install-test-deps.sh (pins: scripts/package.json, scripts/requirements-test.txt)"

func nodeScript(rel string) func(t *testing.T, tg target) map[string]any {
	return func(t *testing.T, tg target) map[string]any {
		modules := filepath.Join(toolsDir(), "node_modules")
		if _, err := os.Stat(modules); err != nil {
			t.Fatalf("no node_modules in %s: %s", toolsDir(), clientsInstallHint)
		}
		env := []string{"NODE_PATH=" + modules, "PATH=" + filepath.Join(modules, ".bin") + string(os.PathListSeparator) + os.Getenv("PATH")}
		return runScript(t, tg, env, "node", rel)
	}
}

func pythonScript(rel string) func(t *testing.T, tg target) map[string]any {
	return func(t *testing.T, tg target) map[string]any {
		return runScript(t, tg, nil, "python3", rel)
	}
}

// scriptTimeout bounds one run of a client script; a hung client shows as the
// steps it did not finish.
const scriptTimeout = 45 * time.Second

// runScript runs testdata/clients/<rel> with the target in its environment
// and collects the JSON line each step prints. A run that fails or is killed
// adds the step "~exit" with the reason, so it shows in the diff next to the
// steps that did finish.
func runScript(t *testing.T, tg target, env []string, interp, rel string) map[string]any {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "clients", rel))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, script)
	cmd.Dir = tg.work
	cmd.Env = append(append(os.Environ(), env...), "DB_URL="+tg.http, "DB_WS_URL="+tg.ws, "DB_FILE="+tg.file,
		"DB_HOST="+tg.host, "DB_NAME="+tg.db, "DB_KIND="+tg.kind, fmt.Sprintf("RUN=%d", tg.runNo))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	out := map[string]any{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var step map[string]any
		if err := json.Unmarshal([]byte(line), &step); err != nil {
			t.Fatalf("%s %s against %s printed a line that is not JSON: %v\n%s\nstderr: %s", interp, rel, tg.kind, err, line, lastLines(stderr.String(), 30))
		}
		name, _ := step["step"].(string)
		delete(step, "step")
		out[name] = step
	}
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = fmt.Errorf("killed after %s", scriptTimeout)
		}
		out["~exit"] = fmt.Sprintf("%v; stderr: %s", runErr, lastLines(stderr.String(), 8))
		if tg.kind == "local" {
			t.Fatalf("%s %s against a local file (run %d) failed: the script itself is broken: %v\nstdout: %s\nstderr: %s",
				interp, rel, tg.runNo, runErr, stdout.String(), lastLines(stderr.String(), 30))
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s %s against %s printed no steps\nstderr: %s", interp, rel, tg.kind, lastLines(stderr.String(), 30))
	}
	return out
}

func countDiffs(local, remote map[string]any) int {
	return strings.Count(diffSteps(local, remote), "\n  step ")
}

// diffSteps lists every step whose outcome differs, local first.
func diffSteps(local, remote map[string]any) string {
	keys := map[string]bool{}
	for k := range local {
		keys[k] = true
	}
	for k := range remote {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		l, _ := json.Marshal(local[k])
		r, _ := json.Marshal(remote[k])
		if !bytes.Equal(l, r) {
			fmt.Fprintf(&b, "\n  step %q:\n    local:  %s\n    sluice: %s", k, clip(l), clip(r))
		}
	}
	return b.String()
}

func clip(b []byte) string {
	if len(b) > 1500 {
		return string(b[:1500]) + "…"
	}
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
