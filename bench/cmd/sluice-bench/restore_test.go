package main

import (
	"strings"
	"testing"
)

// `make bench-restore` on a small database: the command runs end to end
// (sluice and Litestream replicating to MinIO, both restores verified) and
// prints its table. Its figures are not asserted: timing is the benchmark's job.
func TestBenchRestoreRunsAndVerifies(t *testing.T) {
	out := mustBench(t, "restore", "-rows", "3000", "-runs", "1")
	for _, want := range []string{"download one object of that size", "sluice restore", "litestream restore (0.5.17)",
		"both restores verified: 3000 rows"} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench restore output lacks %q:\n%s", want, out)
		}
	}
}
