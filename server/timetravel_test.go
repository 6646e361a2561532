package server

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadConfigTimeTravelBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.yml")
	if err := os.WriteFile(path, []byte("time-travel: {max-bytes: 2MiB, max-states: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TimeTravel.MaxBytes != 2<<20 || cfg.TimeTravel.MaxStates != 3 {
		t.Fatalf("time-travel = %+v, want 2 MiB and 3 states", cfg.TimeTravel)
	}
	if err := os.WriteFile(path, []byte("time-travel: {max-state: 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil {
		t.Fatal("a misspelt time-travel key was accepted")
	}
}
