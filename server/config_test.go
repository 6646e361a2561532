package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigExpandsEnvAndRejectsUnknownKeys(t *testing.T) {
	t.Setenv("SLUICE_TEST_TOKEN", "secret-from-env")
	path := filepath.Join(t.TempDir(), "sluice.yml")
	os.WriteFile(path, []byte(`
data: /var/lib/sluice
replica: s3://bucket/prefix
durability: async
tokens:
  - token: ${SLUICE_TEST_TOKEN}
    access: ro
    databases: [a, b]
limits:
  max_body_bytes: 1024
  statement_timeout: 2s
  max_open_databases: 50
  database_idle_timeout: 30s
group:
  max_requests: 64
hrana:
  tx_timeout: 30s
`), 0o644)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tokens[0].Token != "secret-from-env" || cfg.Tokens[0].Access != "ro" || len(cfg.Tokens[0].Databases) != 2 {
		t.Fatalf("tokens = %+v", cfg.Tokens)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.DataDir != "/var/lib/sluice" || cfg.Durability != "async" {
		t.Fatalf("cfg = %+v", cfg)
	}
	if time.Duration(cfg.Limits.StatementTimeout) != 2*time.Second || cfg.Limits.MaxBodyBytes != 1024 || cfg.Group.MaxRequests != 64 ||
		time.Duration(cfg.Hrana.TxTimeout) != 30*time.Second {
		t.Fatalf("limits = %+v, group %+v, hrana %+v", cfg.Limits, cfg.Group, cfg.Hrana)
	}
	if cfg.Limits.MaxOpenDatabases != 50 || time.Duration(cfg.Limits.DatabaseIdleTimeout) != 30*time.Second {
		t.Fatalf("open-database limits = %+v", cfg.Limits)
	}
	os.WriteFile(path, []byte("listen: x\ntokenz: []\n"), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "tokenz") {
		t.Fatalf("unknown key: got %v", err)
	}
	os.WriteFile(path, []byte("limits:\n  statement_timeout: soon\n"), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Fatalf("bad duration: got %v", err)
	}
}

// Kebab-case keys (as in Litestream's files), human sizes and durations, and
// listen: read as addr:.
func TestLoadConfigKebabCaseHumanUnitsAndAliases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yml")
	os.WriteFile(path, []byte(`
listen: 0.0.0.0:9000
limits: {max-body-bytes: 8MiB, statement-timeout: 90s, database-idle-timeout: 1d, max-concurrent-uploads: 4}
group: {commit-window: 5ms}
idempotency-window: 7d
lease: {poll-interval: 250ms}
compaction: {snapshot-interval: 2h, workers: 2}
`), 0o644)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "0.0.0.0:9000" || cfg.Limits.MaxBodyBytes != 8<<20 || time.Duration(cfg.Limits.StatementTimeout) != 90*time.Second ||
		time.Duration(cfg.Limits.DatabaseIdleTimeout) != 24*time.Hour || time.Duration(cfg.IdempotencyWindow) != 7*24*time.Hour ||
		time.Duration(cfg.Lease.PollInterval) != 250*time.Millisecond ||
		time.Duration(cfg.Compaction.SnapshotInterval) != 2*time.Hour || cfg.Compaction.Workers != 2 {
		t.Fatalf("cfg = %+v", cfg)
	}
	if time.Duration(cfg.Group.CommitWindow) != 5*time.Millisecond || cfg.Limits.MaxConcurrentUploads != 4 {
		t.Fatalf("commit window %v, uploads %d", time.Duration(cfg.Group.CommitWindow), cfg.Limits.MaxConcurrentUploads)
	}
	os.WriteFile(path, []byte("group: {commit-window: soon}\n"), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Fatalf("bad commit window: %v", err)
	}
	os.WriteFile(path, []byte("limits: {max-body-bytes: 8XB}\n"), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "not a size") {
		t.Fatalf("bad size: %v", err)
	}
	os.WriteFile(path, []byte("limits: {max-body-byte: 1}\n"), 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), `did you mean "max-body-bytes"`) {
		t.Fatalf("typo: %v", err)
	}
}

// A serve config whose replica comes from a variable that is not set, or
// names an empty replica, stops the server instead of letting it write to
// the local default while the operator believes the data is in the bucket.
func TestLoadConfigRefusesUnsetVariablesAndAnEmptyReplica(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"data: ./d\nreplica: ${SLUICE_TEST_UNSET_REPLICA}\n":            "$SLUICE_TEST_UNSET_REPLICA is not set",
		"replica: s3://b/app\ntokens:\n  - token: $SLUICE_TEST_UNSET\n": "$SLUICE_TEST_UNSET is not set",
		"data: ./d\nreplica: \"\"\n":                                    "replica is empty",
		"data: ./d\nreplica:\n":                                         "replica is empty",
	} {
		path := filepath.Join(dir, "serve.yml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: err = %v, want %q", body, err, want)
		}
	}
	// Left out, the replica is derived from the data directory by the caller.
	path := filepath.Join(dir, "serve.yml")
	if err := os.WriteFile(path, []byte("# about $5 a month\ndata: ./d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(path); err != nil || cfg.Replica != "" {
		t.Fatalf("cfg.Replica = %q, err %v", cfg.Replica, err)
	}
}

func TestDefaultReplicaFollowsTheDataDirectory(t *testing.T) {
	for data, want := range map[string]string{
		"./sluice-data":   "file://./sluice-data/replica",
		"sluice-data":     "file://./sluice-data/replica",
		"/var/lib/sluice": "file:///var/lib/sluice/replica",
		"../up":           "file://../up/replica",
	} {
		if got := DefaultReplica(data); got != want {
			t.Errorf("DefaultReplica(%q) = %q, want %q", data, got, want)
		}
	}
}
