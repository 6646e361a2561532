package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The stall settings are read from the config file, at the top level like
// replica-error-budget, and the forward timeout under lease:.
func TestLoadConfigStallKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yml")
	if err := os.WriteFile(path, []byte("stall-threshold: 1500ms\nwrite-stall-timeout: 4s\nlease: {forward-timeout: 3s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.StallThreshold) != 1500*time.Millisecond || time.Duration(cfg.WriteStallTimeout) != 4*time.Second ||
		time.Duration(cfg.Lease.ForwardTimeout) != 3*time.Second {
		t.Fatalf("stall-threshold %s, write-stall-timeout %s, forward-timeout %s; want 1.5s, 4s, 3s",
			time.Duration(cfg.StallThreshold), time.Duration(cfg.WriteStallTimeout), time.Duration(cfg.Lease.ForwardTimeout))
	}
}
