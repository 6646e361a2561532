package main

import (
	"regexp"
	"testing"
)

func TestBenchHandoffPrintsGapsAndFollowerLag(t *testing.T) {
	out := mustBench(t, "handoff", "-ttl", "1s", "-duration", "2s", "-vus", "4")
	for _, re := range []string{
		`SIGTERM\s+handoff gap .*: +[0-9.]+m?s +\(\d+ writes accepted\)`,
		`kill -9\s+handoff gap .*: +[0-9.]+m?s +\(\d+ writes accepted\)`,
		`follower lag under single-row inserts .* \d+ probes:\n\s+p50 [0-9.]+m?s +p99 [0-9.]+m?s`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("bench handoff output lacks %q:\n%s", re, out)
		}
	}
	t.Log(out)
}
