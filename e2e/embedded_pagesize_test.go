package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testenv"
)

// libSQL's clients cut every sync answer into 4096-byte pages, so a
// database with other pages (here 8192, replicated by the sidecar into the
// bucket the server serves) cannot be an embedded replica: the clients are
// refused with one line saying why and what to do, and nothing is written
// locally as if it had worked. The same database still serves remote reads.
func TestEmbeddedReplicaRefusesOtherPageSizes(t *testing.T) {
	m := testenv.MinIO(t)
	bucket := m.NewBucket(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "big.db")
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA page_size=8192", "PRAGMA journal_mode=WAL",
		"CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)", "INSERT INTO t(v) VALUES ('eight-k')"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	side := start(t, m.Env(), sluiceBin, "replicate", file, m.URL(bucket, "big"), "-sync-interval", "50ms")
	stopSidecar(t, side)

	host := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort())
	embeddedServe(t, m.Env(), t.TempDir(), m.URL(bucket, ""), host, "")
	if got := embQueryDB(t, host, "big", "SELECT v FROM t"); fmt.Sprint(got) != "[[eight-k]]" {
		t.Fatalf("remote read of the 8192-byte-page database: %v", got)
	}
	if got := embQueryDB(t, host, "big", "PRAGMA page_size"); fmt.Sprint(got) != "[[8192]]" {
		t.Fatalf("page size on the server: %v", got)
	}
	for _, path := range []string{"/db/big/export/1", "/db/big/sync/1/1/2"} {
		req, _ := http.NewRequest("GET", "http://"+host+path, nil)
		req.Header.Set("Authorization", "Bearer "+embRW)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(raw), "8192-byte pages") {
			t.Fatalf("%s: %d %s, want 422 naming the page size", path, resp.StatusCode, raw)
		}
	}
	// Frames written offline and pushed (libSQL's push) are refused in one
	// line; nothing reaches the database.
	req, _ := http.NewRequest("POST", "http://"+host+"/db/big/sync/1/1/2", strings.NewReader(strings.Repeat("x", 4096+24)))
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(raw), "not supported") {
		t.Fatalf("a push: %d %s, want 405 saying push is not supported", resp.StatusCode, raw)
	}
	if got := embQueryDB(t, host, "big", "SELECT count(*) FROM t"); fmt.Sprint(got) != "[[1]]" {
		t.Fatalf("after a refused push the database has %v rows, want 1", got)
	}
	for _, c := range replicaClients() {
		local := filepath.Join(t.TempDir(), "local.db")
		r := c.run(t, local, "http://"+host+"/db/big/", embRW, "sync")
		if r.Error == "" || !strings.Contains(r.Error, "4096-byte pages") {
			t.Fatalf("%s: an embedded replica of an 8192-byte-page database: %+v; want it refused, naming the page size", c.name, r)
		}
		t.Logf("%s is refused: %s", c.name, r.Error)
		// The application started again on what the first attempt left
		// is refused again, never shown an empty database.
		if r := c.run(t, local, "http://"+host+"/db/big/", embRW, "sync"); r.Error == "" || !strings.Contains(r.Error, "4096-byte pages") {
			t.Fatalf("%s, second attempt: %+v; want it refused again", c.name, r)
		}
	}
}

// embQueryDB runs SQL on database name through the JSON API.
func embQueryDB(t *testing.T, host, name, sql string) [][]any {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+host+"/v1/databases/"+name+"/query", strings.NewReader(fmt.Sprintf(`{"sql": %q}`, sql)))
	req.Header.Set("Authorization", "Bearer "+embRW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Results []struct {
			Rows [][]any `json:"rows"`
		} `json:"results"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Results) != 1 {
		t.Fatalf("%s on %s: %d %v", sql, name, resp.StatusCode, err)
	}
	return out.Results[0].Rows
}
