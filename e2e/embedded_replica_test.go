package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// Embedded replicas: an application keeps a local copy of a served database
// with libSQL's clients (Python libsql, @libsql/client), syncs it from `sluice serve
// -durability sync` on MinIO, reads it locally, and writes through it (the
// client sends the write to the server over Hrana). Every comparison is the
// local file's rows against the server's.

const (
	embRW    = "embedded-rw-token-0001"
	embRO    = "embedded-ro-token-0002" // read-only, app only
	embOther = "embedded-other-token-03"
	embOtRO  = "embedded-other-ro-token-04" // read-only, another database
)

func embeddedServe(t *testing.T, env []string, data, replicaURL, host string, extra string) *process {
	t.Helper()
	cfg := writeFile(t, t.TempDir(), "serve.yml", fmt.Sprintf(`data: %s
replica: %s
addr: %s
durability: sync
tokens:
  - token: %s
  - token: %s
    access: ro
    databases: [app]
  - token: %s
    databases: [other]
  - token: %s
    access: ro
    databases: [other]
%s`, data, replicaURL, host, embRW, embRO, embOther, embOtRO, extra))
	p := start(t, env, sluiceBin, "serve", "-config", cfg)
	waitUntil(t, 60*time.Second, func() bool { return readyCode("http://"+host+"/ready") == 200 }, p)
	return p
}

// embCreate creates the database app with the read-write token.
func embCreate(t *testing.T, host string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", "http://"+host+"/v1/databases/app", nil)
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("create app: %v %v", resp, err)
	}
	resp.Body.Close()
}

// embQuery runs SQL through the JSON API and returns the rows.
func embQuery(t *testing.T, host, sql string, args ...any) [][]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"sql": sql, "params": args})
	req, _ := http.NewRequest("POST", "http://"+host+"/v1/databases/app/query", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", sql, resp.StatusCode, raw)
	}
	var out struct {
		Results []struct {
			Rows [][]any `json:"rows"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("%s: %v %s", sql, err, raw)
	}
	return out.Results[0].Rows
}

type replicaRun struct {
	Rows      [][]any `json:"rows"`
	Integrity string  `json:"integrity"`
	Error     string  `json:"error"`
}

// replicaClient is one libSQL client's embedded-replica application: a
// script in testdata/embedded run by interp, or (no interp) the libsql
// crate's replica program.
type replicaClient struct {
	name   string
	interp string
	script string
	env    []string
}

func replicaClients() []replicaClient {
	modules := filepath.Join(toolsDir(), "node_modules")
	return []replicaClient{
		{"python-libsql", "python3", "replica.py", nil},
		{"libsql-client-js", "node", "replica.js", []string{"NODE_PATH=" + modules}},
		{"libsql-rust", "", "", nil},
	}
}

// run runs the application once on its local file.
func (c replicaClient) run(t *testing.T, local, url, token string, args ...string) replicaRun {
	t.Helper()
	name, argv := c.interp, append([]string{local, url, token}, args...)
	if c.interp == "" {
		name = rustProgram(t, "replica")
	} else {
		script, _ := filepath.Abs(filepath.Join("testdata", "embedded", c.script))
		argv = append([]string{script}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.Output() // a failure is the JSON line's error
	// The client may log to stdout before it (libSQL's core on errors):
	// the script's line is the last.
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndex(line, "\n{"); i >= 0 {
		line = line[i+1:]
	}
	var r replicaRun
	if jerr := json.Unmarshal([]byte(line), &r); jerr != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = lastLines(string(ee.Stderr), 10)
		}
		t.Fatalf("%s printed %q: %v; stderr: %s", c.name, out, jerr, stderr)
	}
	return r
}

// sameRows compares the replica's rows with the server's (JSON numbers).
func sameRows(t *testing.T, what string, local, server [][]any) {
	t.Helper()
	norm := func(rows [][]any) string { b, _ := json.Marshal(rows); return string(b) }
	if !reflect.DeepEqual(norm(local), norm(server)) {
		t.Fatalf("%s: the replica has %d rows, the server %d\nreplica: %.300s\nserver:  %.300s", what, len(local), len(server), norm(local), norm(server))
	}
}

func syncAnswer(t *testing.T, host, path, token string) (int, string, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+host+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Sluice-Sync-Answer"), len(raw)
}

func TestEmbeddedReplicaSyncsReadsAndWritesThrough(t *testing.T) {
	t.Parallel()
	for _, c := range replicaClients() {
		t.Run(c.name, func(t *testing.T) { embeddedSyncsReadsAndWritesThrough(t, c) })
	}
}

func embeddedSyncsReadsAndWritesThrough(t *testing.T, c replicaClient) {
	runReplica := c.run
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	data := t.TempDir()
	embeddedServe(t, m.Env(), data, m.URL(bucket, ""), host, "")
	base := "http://" + host

	embCreate(t, host)
	embQuery(t, host, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	for i := range 50 {
		embQuery(t, host, "INSERT INTO t(v) VALUES (?)", fmt.Sprintf("row-%d-%s", i, strings.Repeat("x", 200)))
	}

	url := base + "/db/app/" // with the trailing slash libSQL's clients need
	local := filepath.Join(t.TempDir(), "local.db")

	// Bootstrap with the read-only token: a sync only reads.
	r := runReplica(t, local, url, embRO, "sync")
	if r.Error != "" {
		t.Fatalf("bootstrap: %s", r.Error)
	}
	sameRows(t, "after bootstrap", r.Rows, embQuery(t, host, "SELECT id, v FROM t ORDER BY id"))
	t.Logf("bootstrapped %d rows", len(r.Rows))
	bootGen := replicaMeta(t, local).Generation

	// New commits on the server arrive with the next sync of the same file,
	// as the pages they changed, not the database.
	for i := range 20 {
		embQuery(t, host, "INSERT INTO t(v) VALUES (?)", fmt.Sprintf("later-%d", i))
	}
	info := struct {
		Gen uint64 `json:"current_generation"`
	}{}
	{
		req, _ := http.NewRequest("GET", base+"/db/app/info", nil)
		req.Header.Set("Authorization", "Bearer "+embRO)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.NewDecoder(resp.Body).Decode(&info)
		resp.Body.Close()
	}
	head := headTXID(t, host)
	// A new replica starts from the image made for the first one (no
	// restore per bootstrap) while the changes since are known.
	if info.Gen != bootGen || head != bootGen+20 {
		t.Fatalf("/info names generation %d (head %d); want the image's, %d", info.Gen, head, bootGen)
	}
	second := c.run(t, filepath.Join(t.TempDir(), "second.db"), url, embRO, "sync")
	if second.Error != "" {
		t.Fatalf("a second replica bootstrapping from the older image: %s", second.Error)
	}
	sameRows(t, "a second replica, from the older image and the changes since", second.Rows, embQuery(t, host, "SELECT id, v FROM t ORDER BY id"))
	code, answer, n := syncAnswer(t, host, fmt.Sprintf("/db/app/sync/%d/1/2", head-1), embRO)
	if code != 200 || answer != "diff" || n%(4096+24) != 0 || n/(4096+24) > 3 {
		t.Fatalf("the sync after one commit answered %d %q with %d bytes; want a diff of at most 3 frames", code, answer, n)
	}
	if code, answer, _ := syncAnswer(t, host, fmt.Sprintf("/db/app/sync/%d/1/2", head), embRO); code != 400 || answer != "end" {
		t.Fatalf("a sync with nothing new answered %d %q; want 400 end of generation", code, answer)
	}
	if c.name == "python-libsql" { // once: the server's side of the walk, as libSQL's client makes it
		// One transaction of the changed pages, then the end: the client
		// stops there, remembered at the TXID it was sent.
		if requests, frames := walkCost(t, host, head-20, head); requests != 2 || frames > 3 {
			t.Fatalf("a sync over 20 commits took %d requests and %d frames; want 2 and the few changed pages", requests, frames)
		}
	}
	// The application restarts: it re-opens its local file and the sync
	// brings the 20 commits as their pages, with no new bootstrap.
	before := syncCost(t, host)
	r = runReplica(t, local, url, embRO, "sync")
	if r.Error != "" {
		t.Fatalf("incremental sync: %s", r.Error)
	}
	server := embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
	sameRows(t, "after 20 commits and sync", r.Rows, server)
	if r.Integrity != "ok" {
		t.Fatalf("local file after sync: integrity_check says %q", r.Integrity)
	}
	after := syncCost(t, host)
	dbBytes := embDatabaseBytes(t, host)
	t.Logf("restart + sync over 20 commits: %d bytes of pages sent (%d diff answers), database %d bytes", after.bytes-before.bytes, after.diffs-before.diffs, dbBytes)
	if after.exports != before.exports || after.databases != before.databases || after.diffs <= before.diffs ||
		after.bytes-before.bytes > 4*(4096+24) || after.bytes-before.bytes >= dbBytes/4 {
		t.Fatalf("the restarted application's sync cost %+v -> %+v; want no export, no whole database, a diff of a few pages (database: %d bytes)", before, after, dbBytes)
	}

	// Syncs while a writer commits flat out: each returns (a client that
	// stepped one generation per commit would chase the head forever),
	// every local state is a state the server had (a prefix of its rows,
	// ids ascending) and the file is sound; once the writer stops, one
	// sync brings every acknowledged row.
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			if !embInsert(host, fmt.Sprintf("concurrent-%d", n)) {
				done <- -1
				return
			}
			n++
		}
	}()
	for i := range 6 {
		began := time.Now()
		r = runReplica(t, local, url, embRO, "sync")
		t.Logf("sync %d under writes: %d rows, %s", i, len(r.Rows), time.Since(began).Round(time.Millisecond))
		if r.Error != "" || r.Integrity != "ok" {
			close(stop)
			t.Fatalf("sync %d under writes: %+v", i, r.Error+" "+r.Integrity)
		}
		server = embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
		if len(r.Rows) > len(server) {
			close(stop)
			t.Fatalf("sync %d: the replica has %d rows, more than the server's %d", i, len(r.Rows), len(server))
		}
		sameRows(t, fmt.Sprintf("sync %d under writes (a prefix of the server's rows)", i), r.Rows, server[:len(r.Rows)])
	}
	close(stop)
	acked := <-done
	if acked < 0 {
		t.Fatal("a write of the concurrent writer failed")
	}
	r = runReplica(t, local, url, embRO, "sync")
	server = embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
	sameRows(t, "after the writer stopped", r.Rows, server)
	if got := embQuery(t, host, "SELECT count(*) FROM t WHERE v LIKE 'concurrent-%'"); fmt.Sprint(got) != fmt.Sprintf("[[%d]]", acked) {
		t.Fatalf("%d concurrent writes acknowledged, the server has %v", acked, got)
	}
	t.Logf("%d writes acknowledged, flat out, during 6 syncs; the replica has all %d rows", acked, len(r.Rows))

	// A write through the replica reaches the server durably and is read
	// back locally after sync (read-your-writes).
	r = runReplica(t, local, url, embRW, "write", "through-the-replica")
	if r.Error != "" {
		t.Fatalf("write through the replica: %s", r.Error)
	}
	server = embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
	if got := server[len(server)-1][1]; got != "through-the-replica" {
		t.Fatalf("the server's last row is %v, not the replica's write", got)
	}
	sameRows(t, "after a write through the replica", r.Rows, server)
	t.Logf("replica and server agree on %d rows", len(server))

	// Another application's writes (its own replica, writing through it)
	// appear in this one's after its next sync.
	if w := c.run(t, filepath.Join(t.TempDir(), "second-app.db"), url, embRW, "write", "from-another-client"); w.Error != "" {
		t.Fatalf("a second client's write: %s", w.Error)
	}
	r = runReplica(t, local, url, embRO, "sync")
	server = embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
	if r.Error != "" || len(r.Rows) == 0 || r.Rows[len(r.Rows)-1][1] != "from-another-client" {
		t.Fatalf("after another client's write and sync the replica ends with %v (%s); want that write", lastRow(r.Rows), r.Error)
	}
	sameRows(t, "after another client's write", r.Rows, server)

	// Many writes through the replica, each followed by a sync: its local
	// WAL fills (1000 frames) and its generation ends: it checkpoints and
	// carries on in the next one.
	r = runReplica(t, local, url, embRW, "churn", "250")
	if r.Error != "" || r.Integrity != "ok" {
		t.Fatalf("250 large writes and syncs through the replica: %s %s", r.Error, r.Integrity)
	}
	server = embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
	sameRows(t, "after 250 large writes and syncs", r.Rows, server)
	meta := replicaMeta(t, local)
	t.Logf("after 250 large writes: %d rows, replica in generation %d (bootstrapped in %d) at frame %d", len(server), meta.Generation, bootGen, meta.DurableFrameNo)
	if meta.Generation <= bootGen || meta.Generation > bootGen+3 || meta.DurableFrameNo > 1200 {
		t.Fatalf("after 250 large writes the replica is in generation %d at frame %d; want one or two generations on from %d and its WAL bounded", meta.Generation, meta.DurableFrameNo, bootGen)
	}

	// Tokens: another database's token and no token are refused; so is a
	// read-only token writing through the replica.
	if code, _, _ := syncAnswer(t, host, "/db/app/info", embOther); code != 403 {
		t.Fatalf("/info with another database's token: %d, want 403", code)
	}
	if code, _, _ := syncAnswer(t, host, "/db/app/export/1", ""); code != 401 {
		t.Fatalf("/export without a token: %d, want 401", code)
	}
	// Python shows the 403; @libsql/client and the libsql crate fall back
	// to the gRPC replication service on any /info error other than 401
	// and report only a handshake timeout.
	for _, tok := range []string{embOther, embOtRO} {
		if r := runReplica(t, filepath.Join(t.TempDir(), "other.db"), url, tok, "sync"); r.Error == "" ||
			(c.name == "python-libsql" && !strings.Contains(r.Error, "403")) {
			t.Fatalf("a replica with another database's token: %+v, want it refused (403)", r)
		} else {
			t.Logf("another database's token: %s", r.Error)
		}
	}
	if code, _, _ := syncAnswer(t, host, fmt.Sprintf("/db/app/sync/%d/1/2", bootGen), embOtRO); code != 403 {
		t.Fatalf("/sync with another database's read-only token: %d, want 403", code)
	}
	if r := runReplica(t, local, url, embRO, "write", "refused"); r.Error == "" {
		t.Fatal("a read-only token wrote through the replica")
	}
	if got := embQuery(t, host, "SELECT count(*) FROM t WHERE v = 'refused'"); fmt.Sprint(got) != "[[0]]" {
		t.Fatalf("the refused write is on the server: %v", got)
	}
	// The trailing slash's doubled path reaches the endpoint, not a redirect.
	if code, _, _ := syncAnswer(t, host, "/db/app//info", embRO); code != 200 {
		t.Fatalf("/db/app//info: %d, want 200", code)
	}
}

// A replica that was offline while the server restarted (its memory of
// recent pages is gone), many commits landed and compaction rewrote and
// pruned the history catches up with one sync.
func TestEmbeddedReplicaFarBehindCatchesUp(t *testing.T) {
	t.Parallel()
	for _, c := range replicaClients() {
		t.Run(c.name, func(t *testing.T) { embeddedFarBehindCatchesUp(t, c.run) })
	}
}

func embeddedFarBehindCatchesUp(t *testing.T, runReplica func(t *testing.T, local, url, token string, args ...string) replicaRun) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	data := t.TempDir()
	compaction := "compaction: {snapshot-interval: 1s, retention: 2s}\n"
	p := embeddedServe(t, m.Env(), data, m.URL(bucket, ""), host, compaction)
	base := "http://" + host
	embCreate(t, host)
	embQuery(t, host, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
	embQuery(t, host, "INSERT INTO t(v) VALUES ('first')")
	url := base + "/db/app/"
	local := filepath.Join(t.TempDir(), "local.db")
	if r := runReplica(t, local, url, embRO, "sync"); r.Error != "" || len(r.Rows) != 1 {
		t.Fatalf("bootstrap: %+v", r)
	}

	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.wait(t, 30*time.Second)
	embeddedServe(t, m.Env(), data, m.URL(bucket, ""), host, compaction)
	var meta struct {
		Generation uint64 `json:"generation"`
	}
	if raw, err := os.ReadFile(local + "-info"); err != nil || json.Unmarshal(raw, &meta) != nil || meta.Generation == 0 {
		t.Fatalf("the replica's metadata: %v %s", err, raw)
	}
	// One large transaction (its file is too big to keep in memory) starts
	// the server's window of recent pages after it: the replica's
	// generation is older than anything the server can send a diff from.
	embQuery(t, host, "CREATE TABLE big(b BLOB)")
	embQuery(t, host, "INSERT INTO big SELECT randomblob(300000)")
	acked := 1
	for i := range 60 {
		embQuery(t, host, "INSERT INTO t(v) VALUES (?)", fmt.Sprintf("while-away-%d-%s", i, strings.Repeat("y", 500)))
		acked++
	}
	time.Sleep(3 * time.Second) // snapshots every second, retention 2 s: the old history is pruned

	// What the replica will be answered: its own generation ends at once
	// (nothing sent), the generation just before the window gets the whole
	// database, later ones the pages changed since.
	g := meta.Generation
	if code, answer, _ := syncAnswer(t, host, fmt.Sprintf("/db/app/sync/%d/1/2", g), embRO); code != 400 || answer != "end" {
		t.Fatalf("generation %d (before the window): %d %q, want end of generation", g, code, answer)
	}
	if code, answer, n := syncAnswer(t, host, fmt.Sprintf("/db/app/sync/%d/1/2", g+2), embRO); code != 200 || answer != "database" || n < 70*4096 {
		t.Fatalf("generation %d (the window's edge): %d %q %d bytes, want the whole database", g+2, code, answer, n)
	}
	if code, answer, _ := syncAnswer(t, host, fmt.Sprintf("/db/app/sync/%d/1/2", g+3), embRO); code != 200 || answer != "diff" {
		t.Fatalf("generation %d (inside the window): %d %q, want a diff", g+3, code, answer)
	}
	r := runReplica(t, local, url, embRO, "sync")
	if r.Error != "" {
		t.Fatalf("far-behind sync: %s", r.Error)
	}
	server := embQuery(t, host, "SELECT id, v FROM t ORDER BY id")
	if len(server) != acked {
		t.Fatalf("the server has %d rows, %d were acknowledged", len(server), acked)
	}
	sameRows(t, "far behind, after sync", r.Rows, server)
	if r.Integrity != "ok" {
		t.Fatalf("integrity_check: %q", r.Integrity)
	}
	t.Logf("acknowledged %d, replica has %d rows after catching up", acked, len(r.Rows))
}

// walkCost makes the requests libSQL's client makes to sync from generation
// from (frames of a generation until an end of generation; stop when it
// names no newer one, else the next generation from frame 1) and reports
// what they cost.
func walkCost(t *testing.T, host string, from, head uint64) (requests, frames int) {
	t.Helper()
	bytes := 0
	gen, next := from, uint64(1)
	for requests < 10*int(head-from+2) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/db/app/sync/%d/%d/%d", host, gen, next, next+128), nil)
		req.Header.Set("Authorization", "Bearer "+embRO)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		requests++
		bytes += len(raw)
		switch {
		case resp.StatusCode == 200 && len(raw)%(4096+24) == 0:
			frames += len(raw) / (4096 + 24)
			next += uint64(len(raw) / (4096 + 24))
		case resp.StatusCode == 400:
			var end struct {
				Generation uint64 `json:"generation"`
			}
			if err := json.Unmarshal(raw, &end); err != nil {
				t.Fatalf("end of generation: %s", raw)
			}
			if gen >= end.Generation {
				t.Logf("sync over %d commits: %d requests, %d frames, %d bytes", head-from, requests, frames, bytes)
				return requests, frames
			}
			gen, next = gen+1, 1
		default:
			t.Fatalf("sync %d/%d: %d %s", gen, next, resp.StatusCode, raw)
		}
	}
	t.Fatalf("the walk from %d to %d did not end", from, head)
	return
}

// embInsert writes one row through the JSON API from a goroutine (no t).
func embInsert(host, v string) bool {
	body, _ := json.Marshal(map[string]any{"sql": "INSERT INTO t(v) VALUES (?)", "params": []any{v}})
	req, _ := http.NewRequest("POST", "http://"+host+"/v1/databases/app/query", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == 200
}

// An embedded replica may sync from any instance: a `-follow` instance
// answers /info, /export and /sync from the copy it follows (the writer
// sees none of them) and forwards the writes to the writer; a client that
// wrote through it reads its write back after sync.
func TestEmbeddedReplicaThroughAFollowInstance(t *testing.T) {
	t.Parallel()
	for _, c := range replicaClients() {
		t.Run(c.name, func(t *testing.T) {
			m := testenv.MinIO(t)
			bucket := m.NewBucket(t)
			writer := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
			follower := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
			embeddedServe(t, m.Env(), t.TempDir(), m.URL(bucket, ""), writer,
				fmt.Sprintf("lease: {enabled: true, ttl: 2s, advertise: \"http://%s\"}\n", writer))
			req, _ := http.NewRequest("PUT", "http://"+writer+"/v1/databases/app", nil)
			req.Header.Set("Authorization", "Bearer "+embRW)
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
				t.Fatalf("create app: %v %v", resp, err)
			}
			embQuery(t, writer, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
			acked := 0
			for i := range 100 {
				embQuery(t, writer, "INSERT INTO t(v) VALUES (?)", fmt.Sprintf("w-%d-%s", i, strings.Repeat("x", 300)))
				acked++
			}
			fp := embeddedServe(t, m.Env(), t.TempDir(), m.URL(bucket, ""), follower, "lease: {follow: true, poll-interval: 50ms}\n")

			url := "http://" + follower + "/db/app/"
			local := filepath.Join(t.TempDir(), "local.db")
			r := c.run(t, local, url, embRO, "sync")
			if r.Error != "" {
				t.Fatalf("bootstrap through the follower: %s", r.Error)
			}
			sameRows(t, "bootstrap through the follower", r.Rows, embQuery(t, writer, "SELECT id, v FROM t ORDER BY id"))

			// Commits on the writer reach the replica through the
			// follower's copy, as the pages they changed.
			for i := range 20 {
				embQuery(t, writer, "INSERT INTO t(v) VALUES (?)", fmt.Sprintf("later-%d", i))
				acked++
			}
			head := headTXID(t, writer)
			waitUntil(t, 30*time.Second, func() bool { return followerTXID(t, follower) >= head }, fp)
			before := syncCost(t, follower)
			r = c.run(t, local, url, embRO, "sync")
			after := syncCost(t, follower)
			if r.Error != "" {
				t.Fatalf("sync through the follower: %s", r.Error)
			}
			sameRows(t, "after 20 commits, synced through the follower", r.Rows, embQuery(t, writer, "SELECT id, v FROM t ORDER BY id"))
			dbBytes := embDatabaseBytes(t, writer)
			t.Logf("sync over 20 commits from the follower: %d bytes in %d diff answers; database %d bytes", after.bytes-before.bytes, after.diffs-before.diffs, dbBytes)
			if after.exports != before.exports || after.databases != before.databases || after.diffs == before.diffs || after.bytes-before.bytes > dbBytes/3 {
				t.Fatalf("the follower's answers %+v -> %+v; want diffs of the few changed pages, no export, no whole database (%d bytes)", before, after, dbBytes)
			}

			// Read-your-writes through the follower: the write is
			// forwarded to the writer, and the sync right after it waits
			// for the follower to apply it.
			for i := range 5 {
				v := fmt.Sprintf("through-the-follower-%d", i)
				r = c.run(t, local, url, embRW, "write", v)
				if r.Error != "" {
					t.Fatalf("write through the follower: %s", r.Error)
				}
				acked++
				if got := lastRow(r.Rows); got == nil || got.([]any)[1] != v {
					t.Fatalf("after writing %q through the follower and syncing, the replica's last row is %v", v, got)
				}
			}
			server := embQuery(t, writer, "SELECT id, v FROM t ORDER BY id")
			sameRows(t, "after writes through the follower", r.Rows, server)
			if len(server) != acked {
				t.Fatalf("%d writes acknowledged, the writer has %d rows", acked, len(server))
			}

			// Tokens hold at the follower: another database's token is
			// refused, before any copy starts.
			for _, path := range []string{"/db/app/info", "/db/app/export/1", "/db/app/sync/1/1/2"} {
				if code, _, _ := syncAnswer(t, follower, path, embOtRO); code != 403 {
					t.Fatalf("%s at the follower with another database's read-only token: %d, want 403", path, code)
				}
			}
			if r := c.run(t, filepath.Join(t.TempDir(), "other.db"), url, embOtRO, "sync"); r.Error == "" {
				t.Fatalf("a replica with another database's read-only token synced from the follower: %+v", r)
			}
			if w := syncRequestsSeen(t, writer); w != 0 {
				t.Fatalf("the writer answered %d sync requests; the follower should have answered them all", w)
			}
			t.Logf("%d writes acknowledged; the replica synced through the follower has all %d rows; the writer answered no sync request", acked, len(r.Rows))
		})
	}
}

// followerTXID is the TXID the -follow instance's copy of app applied.
func followerTXID(t *testing.T, host string) uint64 {
	return uint64(metricValue(t, host, `sluice_follower_txid{db="app"}`))
}

// syncRequestsSeen counts the sync endpoints' requests an instance answered.
func syncRequestsSeen(t *testing.T, host string) int {
	n := 0
	for _, route := range []string{"GET /db/{name}/info", "GET /db/{name}/export/{generation}", "GET /db/{name}/sync/{generation}/{start}/{end}"} {
		n += int(metricValue(t, host, `sluice_http_requests_total{route="`+route+`"`))
	}
	return n
}

// metricValue sums the series of host's /metrics that start with prefix.
func metricValue(t *testing.T, host, prefix string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+host+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

type replicaMetadata struct {
	Generation     uint64 `json:"generation"`
	DurableFrameNo uint64 `json:"durable_frame_num"`
}

// replicaMeta reads the client's own record of its position (LOCAL-info).
func replicaMeta(t *testing.T, local string) replicaMetadata {
	t.Helper()
	var m replicaMetadata
	raw, err := os.ReadFile(local + "-info")
	if err != nil || json.Unmarshal(raw, &m) != nil || m.Generation == 0 {
		t.Fatalf("the replica's metadata: %v %s", err, raw)
	}
	return m
}

// headTXID is the database's newest TXID, from the JSON API.
func headTXID(t *testing.T, host string) uint64 {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+host+"/v1/databases/app", nil)
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct {
		TXID uint64 `json:"txid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.TXID == 0 {
		t.Fatalf("GET /v1/databases/app: %v", err)
	}
	return d.TXID
}

func lastRow(rows [][]any) any {
	if len(rows) == 0 {
		return nil
	}
	return rows[len(rows)-1]
}

// syncCosts is what the server counted of its sync answers for app.
type syncCosts struct {
	exports, diffs, databases, ends, bytes int
}

// syncCost reads the server's sync counters for database app.
func syncCost(t *testing.T, host string) syncCosts {
	t.Helper()
	answer := func(a string) int {
		return int(metricValue(t, host, `sluice_embedded_sync_answers_total{db="app",answer="`+a+`"}`))
	}
	return syncCosts{exports: answer("export"), diffs: answer("diff"), databases: answer("database"), ends: answer("end"),
		bytes: int(metricValue(t, host, `sluice_embedded_sync_bytes_total{db="app"}`))}
}

// embDatabaseBytes is the size of database app on the server.
func embDatabaseBytes(t *testing.T, host string) int {
	t.Helper()
	rows := embQuery(t, host, "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size")
	n, _ := rows[0][0].(float64)
	return int(n)
}
