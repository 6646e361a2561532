package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exampleEnv sets the variables the Litestream-shaped examples in
// testdata/litestream expand, and guards the credentials they export.
func exampleEnv(t *testing.T) string {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"DATA_DIR": dir, "BACKUP_DIR": filepath.Join(dir, "backup"), "BUCKET": "bkt",
		"S3_ENDPOINT": "http://127.0.0.1:9000", "MINIO_USER": "user", "MINIO_PASSWORD": "secret",
		"STATUS_PORT": "9999", "WRITER_SCRIPT": "/bin/writer.py",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AZURE_STORAGE_ACCOUNT": "", "AZURE_STORAGE_KEY": "",
	} {
		t.Setenv(k, v)
	}
	configCredentials = map[string]string{}
	return dir
}

func loadExample(t *testing.T, name string) (*sidecarConfig, []dbTarget, []string, error) {
	t.Helper()
	path := filepath.Join("testdata", "litestream", name)
	cfg, err := loadSidecarConfig(path, false)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, _ := os.ReadFile(path)
	notices := inapplicableNotices(raw)
	targets, err := cfg.targets(func(s string) { notices = append(notices, s) })
	return cfg, targets, notices, err
}

func TestConfigLitestreamExamplesResolve(t *testing.T) {
	dir := exampleEnv(t)
	cases := []struct {
		file    string
		wantURL []string
		notices []string
	}{
		{"s3-url.yml", []string{"s3://bkt/getting-started/app.db?endpoint=http://127.0.0.1:9000&force-path-style=true"}, nil},
		{"s3-compatible.yml", []string{"s3://bkt/compatible/app.db?endpoint=http%3A%2F%2F127.0.0.1%3A9000&force-path-style=true&region=us-east-1"}, nil},
		{"reference.yml", []string{"s3://bkt/reference/app.db?endpoint=http%3A%2F%2F127.0.0.1%3A9000&force-path-style=true&region=us-east-1"},
			[]string{"mcp-addr", "levels", "validation", "retention.enabled", "part-size", "concurrency", "meta-path", "retention-check-interval", "busy-timeout", "name"}},
		{"file.yml", []string{"file://" + filepath.Join(dir, "backup", "app.db")}, nil},
		{"exec.yml", []string{"file://" + filepath.Join(dir, "backup", "exec")}, nil},
		{"gcs-abs.yml", []string{"gs://my-gcs-bucket/db", "gs://my-gcs-bucket/url-db", "abs://mycontainer/db", "abs://myaccount@mycontainer/url-db"}, nil},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			_, targets, notices, err := loadExample(t, c.file)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tg := range targets {
				got = append(got, tg.ReplicaURL)
			}
			if strings.Join(got, " ") != strings.Join(c.wantURL, " ") {
				t.Fatalf("replica URLs\n got %q\nwant %q", got, c.wantURL)
			}
			all := strings.Join(notices, "\n")
			for _, n := range c.notices {
				if !strings.Contains(all, n) {
					t.Errorf("no notice about %s in:\n%s", n, all)
				}
			}
			if len(c.notices) == 0 && len(notices) > 0 {
				t.Errorf("unexpected notices:\n%s", all)
			}
		})
	}
}

func TestConfigReferenceExampleIsHonoured(t *testing.T) {
	exampleEnv(t)
	cfg, targets, _, err := loadExample(t, "reference.yml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:9999" || cfg.Logging.Type != "json" || cfg.Snapshot.Interval.String() != "1h" ||
		cfg.Snapshot.Retention.String() != "1d" || cfg.L0Retention.String() != "5m" {
		t.Fatalf("global settings not read: %+v", cfg)
	}
	if targets[0].SyncInterval != 200*time.Millisecond {
		t.Fatalf("replica sync-interval = %v, want 200ms", targets[0].SyncInterval)
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") != "user" || os.Getenv("AWS_SECRET_ACCESS_KEY") != "secret" {
		t.Fatal("the replica's access-key-id/secret-access-key were not used")
	}
}

func TestConfigAbsCredentialsAndUnsupportedTypes(t *testing.T) {
	exampleEnv(t)
	if _, _, _, err := loadExample(t, "gcs-abs.yml"); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("AZURE_STORAGE_ACCOUNT") != "myaccount" || os.Getenv("AZURE_STORAGE_KEY") != "a2V5" {
		t.Fatal("account-name/account-key were not used")
	}
	_, _, notices, err := loadExample(t, "sftp.yml")
	if err == nil || !strings.Contains(err.Error(), `"sftp" is not supported`) {
		t.Fatalf("an sftp replica was not refused: %v", err)
	}
	if !strings.Contains(strings.Join(notices, "\n"), "host") {
		t.Fatalf("sftp keys not reported: %q", notices)
	}
}

func TestConfigRefusesTyposAndAcceptsSnakeCase(t *testing.T) {
	dir := exampleEnv(t)
	write := func(body string) string {
		p := filepath.Join(dir, "c.yml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, err := loadSidecarConfig(write("dbs:\n  - path: /x.db\n    replica:\n      url: file:///r\n      sync-intreval: 1s\n"), false)
	if err == nil || !strings.Contains(err.Error(), `did you mean "sync-interval"`) {
		t.Fatalf("typo: %v", err)
	}
	cfg, err := loadSidecarConfig(write("sync_interval: 7d\nl0_retention: 90s\ndbs:\n  - path: /x.db\n    replica:\n      url: file:///r\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.SyncInterval) != 7*24*time.Hour || time.Duration(cfg.L0Retention) != 90*time.Second {
		t.Fatalf("snake_case keys or human durations not read: %+v", cfg)
	}
	// Two databases with one replica would fence each other at random.
	cfg, err = loadSidecarConfig(write("dbs:\n  - path: /a.db\n    replica: {url: file:///r}\n  - path: /b.db\n    replica: {url: file:///r}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.targets(func(string) {}); err == nil || !strings.Contains(err.Error(), "/a.db and /b.db have the same replica file:///r") {
		t.Fatalf("a shared replica: %v", err)
	}
	t.Setenv("SECRET", "s3cr3t")
	cfg, err = loadSidecarConfig(write("dbs:\n  - path: /x.db\n    replica:\n      url: file:///r/$SECRET\n"), true)
	if err != nil || cfg.DBs[0].Replica.URL != "file:///r/$SECRET" {
		t.Fatalf("-no-expand-env expanded: %v %+v", err, cfg.DBs[0].Replica)
	}
}

func TestSplitCommandLine(t *testing.T) {
	got, err := splitCommandLine(`python3 -c 'print("a b")' "x y" z\ w`)
	if err != nil || strings.Join(got, "|") != `python3|-c|print("a b")|x y|z w` {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, bad := range []string{"", "  ", `a 'b`, `a "b`, `a\`} {
		if _, err := splitCommandLine(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConfigPerReplicaRetentionIsHonoured(t *testing.T) {
	exampleEnv(t)
	cfg, _, _, err := loadExample(t, "reference.yml")
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	snap, ret := cfg.compaction(func(s string) { notices = append(notices, s) })
	// Global snapshot: {interval: 1h, retention: 24h}; the replica asks for 72h retention.
	if snap != time.Hour || ret != 72*time.Hour {
		t.Fatalf("snapshot interval %v, retention %v; want 1h, 72h", snap, ret)
	}
}

// Litestream 0.3's several replicas per database: the first sluice can write
// is used and the others are reported, never silently dropped.
func TestConfigSeveralReplicasUseTheFirstAndSayso(t *testing.T) {
	dir := exampleEnv(t)
	p := filepath.Join(dir, "c.yml")
	body := "dbs:\n  - path: /x.db\n    replicas:\n      - type: sftp\n        host: h\n      - path: /backup/x\n      - url: s3://bkt/x\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadSidecarConfig(p, false)
	if err != nil {
		t.Fatal(err)
	}
	var notices []string
	targets, err := cfg.targets(func(s string) { notices = append(notices, s) })
	if err != nil || len(targets) != 1 || targets[0].ReplicaURL != "file:///backup/x" {
		t.Fatalf("targets %+v, %v", targets, err)
	}
	if len(notices) != 2 || !strings.Contains(notices[0], "one replica") {
		t.Fatalf("notices %q", notices)
	}
}

// Litestream's directory mode: every database matching the pattern under dir
// at start, each under its own prefix of the replica.
func TestConfigDirectoryMode(t *testing.T) {
	dir := exampleEnv(t)
	data := filepath.Join(dir, "tenants")
	for _, f := range []string{"a.db", "b.db", "notes.txt", "sub/c.db"} {
		p := filepath.Join(data, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		recursive string
		want      []string
	}{
		{"false", []string{"a.db", "b.db"}},
		{"true", []string{"a.db", "b.db", "sub/c.db"}},
	} {
		p := filepath.Join(dir, "c.yml")
		body := "dbs:\n  - dir: " + data + "\n    pattern: \"*.db\"\n    recursive: " + c.recursive + "\n    watch: true\n    replica:\n      url: s3://bkt/tenants\n"
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadSidecarConfig(p, false)
		if err != nil {
			t.Fatal(err)
		}
		var notices []string
		targets, err := cfg.targets(func(s string) { notices = append(notices, s) })
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tg := range targets {
			rel, _ := filepath.Rel(data, tg.Path)
			if tg.ReplicaURL != "s3://bkt/tenants/"+rel {
				t.Errorf("%s replicates to %s", rel, tg.ReplicaURL)
			}
			got = append(got, rel)
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("recursive %s: databases %q, want %q", c.recursive, got, c.want)
		}
		if len(notices) != 1 || !strings.Contains(notices[0], "next start") {
			t.Errorf("watch: notices %q", notices)
		}
	}
}
