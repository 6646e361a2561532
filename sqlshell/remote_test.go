package sqlshell_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/server"
	"github.com/sluicedb/sluice/sqlshell"
)

// serve starts a real sluice server (file replica) with a read-write and a
// read-only token, and creates database app.
func serve(t *testing.T) string {
	t.Helper()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Compaction.Disabled = true
	cfg.Tokens = []server.TokenConfig{{Token: "rw-token"}, {Token: "ro-token", Access: "ro"}}
	s, err := server.NewWithStore(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)), "test")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close(context.Background())
	})
	return ts.URL
}

func openRemote(t *testing.T, rawURL, db, token string, create bool) (*sqlshell.Remote, error) {
	t.Helper()
	base, name, err := sqlshell.ParseServedURL(rawURL, db)
	if err != nil {
		return nil, err
	}
	r, err := sqlshell.OpenRemote(context.Background(), base, name, token, create)
	if err == nil {
		t.Cleanup(func() { r.Close() })
	}
	return r, err
}

func TestParseServedURL(t *testing.T) {
	for _, c := range []struct{ url, db, base, name string }{
		{"http://127.0.0.1:8080/db/app", "", "http://127.0.0.1:8080", "app"},
		{"http://127.0.0.1:8080/db/app/", "app", "http://127.0.0.1:8080", "app"},
		{"https://h.example/v1/databases/x", "", "https://h.example", "x"},
		{"http://h:1/app", "", "http://h:1", "app"},
		{"http://h:1", "app", "http://h:1", "app"},
	} {
		base, name, err := sqlshell.ParseServedURL(c.url, c.db)
		if err != nil || base.String() != c.base || name != c.name {
			t.Errorf("ParseServedURL(%q, %q) = %v, %q, %v; want %s, %s", c.url, c.db, base, name, err, c.base, c.name)
		}
	}
	for _, c := range []struct{ url, db string }{
		{"http://h:1", ""}, {"http://h:1/db/a", "b"}, {"ftp://h/db/a", ""}, {"http:///db/a", ""}, {"http://h/a/b/c/d", ""},
	} {
		if _, _, err := sqlshell.ParseServedURL(c.url, c.db); err == nil {
			t.Errorf("ParseServedURL(%q, %q) accepted", c.url, c.db)
		}
	}
}

// The shell over a served database: values of every type round-trip
// exactly, BEGIN ... COMMIT is one transaction and ROLLBACK sends nothing,
// tokens are enforced, and .dump/.backup give the same database a local
// shell would.
func TestRemoteShell(t *testing.T) {
	url := serve(t)
	if _, err := openRemote(t, url+"/db/app", "", "wrong", true); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("wrong token: err = %v, want an authentication error", err)
	}
	var apiErr *sqlshell.APIError
	if _, err := openRemote(t, url+"/db/app", "", "rw-token", false); !errors.As(err, &apiErr) || apiErr.Status != 404 {
		t.Fatalf("a database that does not exist: err = %v, want a 404", err)
	}
	r, err := openRemote(t, url+"/db/app", "", "rw-token", true)
	if err != nil {
		t.Fatal(err)
	}

	script := `CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT, b BLOB);
INSERT INTO t (i, f, s, b) VALUES (4611686018427387904, 2.0, 'x''y;z', x'00ff10'),
  (-1, -0.125, '', NULL);
BEGIN;
INSERT INTO t (i) VALUES (100);
INSERT INTO t (i) VALUES (101);
COMMIT;
BEGIN;
INSERT INTO t (i) VALUES (999);
ROLLBACK;
BEGIN;
INSERT INTO t (i) VALUES (7);
INSERT INTO nosuchtable VALUES (1);
COMMIT;
.mode json
SELECT id, i, f, s, b FROM t ORDER BY id;
`
	out, errOut, errs := runShell(t, r, script, "")
	if errs != 1 || !strings.Contains(errOut, "transaction rolled back") || !strings.Contains(errOut, "nosuchtable") {
		t.Errorf("errors %d, want 1 (the failed transaction):\n%s", errs, errOut)
	}
	want := `[{"id":1,"i":4611686018427387904,"f":2.0,"s":"x'y;z","b":{"base64":"AP8Q"}},` + "\n" +
		`{"id":2,"i":-1,"f":-0.125,"s":"","b":null},` + "\n" +
		`{"id":3,"i":100,"f":null,"s":null,"b":null},` + "\n" +
		`{"id":4,"i":101,"f":null,"s":null,"b":null}]` + "\n"
	if out != want {
		t.Errorf("rows:\n%s\nwant:\n%s", out, want)
	}

	// A read-only token reads but cannot write.
	ro, err := openRemote(t, url, "app", "ro-token", false)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, errs = runShell(t, ro, ".mode csv\nSELECT count(*) AS n FROM t;\nINSERT INTO t (i) VALUES (5);\n", "")
	if out != "n\n4\n" || errs != 1 || !strings.Contains(errOut, "read-only access") {
		t.Errorf("read-only token: out %q, %d errors: %s", out, errs, errOut)
	}

	// .backup builds a local file from one snapshot; its dump equals the
	// served database's.
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "copy.db")
	if _, errOut, errs := runShell(t, r, ".backup "+copyPath+"\n", ""); errs != 0 {
		t.Fatalf(".backup: %s", errOut)
	}
	remoteDump, _, _ := runShell(t, r, ".dump\n", "")
	localDump, _, _ := runShell(t, openLocal(t, copyPath, false), ".dump\n", "")
	if remoteDump != localDump || !strings.Contains(remoteDump, "INSERT INTO \"t\" VALUES(1,4611686018427387904,2.0,'x''y;z',X'00ff10');") {
		t.Errorf("dump of the served database:\n%s\ndump of its backup:\n%s", remoteDump, localDump)
	}
}
