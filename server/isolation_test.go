package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The isolation limits are read from the config file under limits:, and the
// pinned-database cap stays below the open-database cap by default.
func TestIsolationLimitsFromConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := `limits:
  max-value-bytes: 1MiB
  idle-write-timeout: 100ms
  max-pinned-databases: 3
  pinned-session-idle: 2s
  max-pipeline-statements: 500
  max-concurrent-long-pipelines: 2
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits
	if l.MaxValueBytes != 1<<20 || time.Duration(l.IdleWriteTimeout) != 100*time.Millisecond || l.MaxPinnedDatabases != 3 ||
		time.Duration(l.PinnedSessionIdle) != 2*time.Second || l.MaxPipelineStatements != 500 || l.MaxConcurrentLongPipelines != 2 {
		t.Fatalf("limits read as %+v", l)
	}
	if n := maxPinnedDatabases(l, 12); n != 3 {
		t.Fatalf("configured cap: %d", n)
	}
	for maxOpen, want := range map[int]int{1: 1, 2: 1, 12: 6, 256: 8} {
		if n := maxPinnedDatabases(Limits{}, maxOpen); n != want || (maxOpen > 1 && n >= maxOpen) {
			t.Fatalf("default cap with %d open databases: %d, want %d", maxOpen, n, want)
		}
	}
}
