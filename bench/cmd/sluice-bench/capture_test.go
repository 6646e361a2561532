package main

import (
	"regexp"
	"strings"
	"testing"
)

// `make bench-capture`, briefly: both replicators run under the writer, the
// table is printed, every commit sluice saw before SIGTERM is in the bucket
// after exit (the command fails otherwise) and sluice never re-read the
// database.
// Its figures are not asserted: timing is the benchmark's job.
func TestBenchCaptureRunsBothReplicators(t *testing.T) {
	out := mustBench(t, "capture", "-duration", "4s", "-window", "2s")
	for _, want := range []string{"peak RSS", "CPU s per GB of WAL", "lag p50/p99 0-2s", "WAL peak size", "SIGTERM to exit", "litestream"} {
		if !strings.Contains(out, want) {
			t.Fatalf("bench capture output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`missing after exit\s+0\s`).MatchString(out) {
		t.Fatalf("commits made before SIGTERM are missing:\n%s", out)
	}
	if !regexp.MustCompile(`full re-reads \(log\)\s+0\s`).MatchString(out) {
		t.Fatalf("sluice re-read the whole database under a steady writer:\n%s", out)
	}
}
