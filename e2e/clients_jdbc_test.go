package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
)

// The DBeaver JDBC driver (com.dbeaver.jdbc.driver.libsql) speaks sqld's
// legacy API: POST {"statements": [...]} to the URL it is given. A tiny Java
// program (testdata/clients/dbeaver-jdbc) runs a script through it against
// `sluice serve`, and the same steps through the SQLite JDBC driver against a
// local file; the steps must agree.

// buildJDBCProgram builds the program offline from the Maven repository the
// deps script fills, in a scratch copy, and returns its class path.
func buildJDBCProgram(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"mvn", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: %s", tool, clientsInstallHint)
		}
	}
	repo := filepath.Join(toolsDir(), "m2")
	if _, err := os.Stat(repo); err != nil {
		t.Fatalf("no Maven repository in %s: %s", repo, clientsInstallHint)
	}
	dir := filepath.Join(t.TempDir(), "dbeaver-jdbc")
	if out, err := exec.Command("cp", "-r", filepath.Join("testdata", "clients", "dbeaver-jdbc"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the program: %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "mvn", "-o", "-q", "-B", "-Dmaven.repo.local="+repo, "package")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mvn -o package (offline; %s): %v\n%s", clientsInstallHint, err, lastLines(string(out), 30))
	}
	t.Logf("built the JDBC program with Maven (offline) in %s", time.Since(start).Round(100*time.Millisecond))
	return filepath.Join(dir, "target", "classes") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*")
}

// runJDBC runs the program against a JDBC URL (with a token, if any) and
// collects its steps.
func runJDBC(t *testing.T, classpath, url string, token ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", append([]string{"-cp", classpath, "Run", url}, token...)...)
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
			t.Fatalf("the JDBC program printed a line that is not JSON: %v\n%s\nstderr: %s", err, line, lastLines(stderr.String(), 20))
		}
		name, _ := step["step"].(string)
		delete(step, "step")
		if msg, ok := step["error"].(string); ok {
			step["error"] = jdbcMessage(msg)
		}
		out[name] = step
	}
	if runErr != nil {
		out["~exit"] = fmt.Sprintf("%v; stderr: %s", runErr, lastLines(stderr.String(), 8))
	}
	if len(out) == 0 {
		t.Fatalf("the JDBC program against %s printed no steps\nstderr: %s", url, lastLines(stderr.String(), 30))
	}
	return out
}

// The SQLite JDBC driver wraps SQLite's message in its result code and a
// description: "[SQLITE_CONSTRAINT_UNIQUE] A UNIQUE constraint failed (MSG)".
var xerialWrap = regexp.MustCompile(`^\[SQLITE_[A-Z_]+\] .*? \((.*)\)$`)

func jdbcMessage(m string) string { return xerialWrap.ReplaceAllString(m, "$1") }

const jdbcToken = "dbeaver-jdbc-test-token"

func TestDBeaverJDBCDriverRunsAScript(t *testing.T) {
	t.Parallel()
	classpath := buildJDBCProgram(t)
	m := testenv.MinIO(t)
	fileRep, bucket := "file://"+filepath.Join(t.TempDir(), "replica"), m.NewBucket(t)
	replicas := []struct {
		name, url string
		of        func(db string) string // one database's replica
	}{
		{"file replica", fileRep, func(db string) string { return fileRep + "/" + db }},
		{"MinIO", m.URL(bucket, ""), func(db string) string { return m.URL(bucket, db) }},
	}
	for _, rep := range replicas {
		t.Run(rep.name, func(t *testing.T) {
			host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
			data := t.TempDir()
			p := start(t, m.Env(), sluiceBin, "serve", "-durability", "sync", "-data", data, "-replica", rep.url, "-listen", host,
				"-token", jdbcToken)
			waitUntil(t, 60*time.Second, func() bool { return readyCode("http://"+host+"/ready") == 200 }, p)
			// The URL forms a DBeaver user types: a named database, and the
			// server's root (the database Hrana's root routes serve).
			urls := []struct{ db, url string }{
				{"jdbc", "http://" + host + "/db/jdbc/"},
				{"default", "http://" + host},
			}
			for _, u := range urls {
				req, _ := http.NewRequest("PUT", "http://"+host+"/v1/databases/"+u.db, nil)
				req.Header.Set("Authorization", "Bearer "+jdbcToken)
				if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
					t.Fatalf("create %s: %v %v", u.db, resp, err)
				}
				local := filepath.Join(t.TempDir(), "local.db")
				for run := 1; run <= 2; run++ {
					want := runJDBC(t, classpath, "jdbc:sqlite:"+local)
					if want["~exit"] != nil {
						t.Fatalf("the JDBC program against a local file failed: %v", want["~exit"])
					}
					got := runJDBC(t, classpath, "jdbc:dbeaver:libsql:"+u.url, jdbcToken)
					t.Logf("%s run %d: %d steps, %d as on a local file", u.url, run, len(want), len(want)-countDiffs(want, got))
					if diff := diffSteps(want, got); diff != "" {
						t.Errorf("%s run %d: sluice differs from a local file:%s", u.url, run, diff)
					}
				}
				// What the driver was answered for is in the replica.
				restored := filepath.Join(t.TempDir(), "restored.db")
				mustSluice(t, m.Env(), "restore", "-o", restored, rep.of(u.db))
				served, back := tablesDigest(t, filepath.Join(data, u.db+".db")), tablesDigest(t, restored)
				if served != back || !strings.Contains(served, "items:3:") {
					t.Errorf("%s: the replica differs from the served database, or lacks the 3 rows the driver wrote:\nserved:   %s\nrestored: %s", u.db, served, back)
				}
				t.Logf("%s: restored from the %s: %s", u.db, rep.name, back)
			}
			// Without the token the driver is refused and says so.
			if got := runJDBC(t, classpath, "jdbc:dbeaver:libsql:"+urls[0].url); !strings.Contains(fmt.Sprint(got["connect"]), "Authentication required") {
				t.Errorf("without a token: %v, want the driver's \"Authentication required\"", got)
			}
			if t.Failed() {
				t.Logf("sluice serve output:\n%s", lastLines(p.out.String(), 40))
			}
		})
	}
}
