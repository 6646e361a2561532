package main

import (
	"strings"
	"testing"
)

// Every benchmark answers help on stdout with exit 0, however it is asked; a
// mistyped one exits 2 with the nearest.
func TestCLIHelpForEveryBenchmark(t *testing.T) {
	top, stderr, code := run3(t, benchBin, "help")
	if code != 0 || stderr != "" {
		t.Fatalf("sluice-bench help: exit %d, stderr %q", code, stderr)
	}
	subs := listed(top, "Subcommands:")
	if len(subs) < 5 {
		t.Fatalf("sluice-bench help lists %q", subs)
	}
	for _, sub := range append(subs, "counter") {
		out, stderr, code := run3(t, benchBin, sub, "-h")
		if code != 0 || stderr != "" || !strings.HasPrefix(out, "Usage: sluice-bench "+sub) {
			t.Errorf("sluice-bench %s -h: exit %d, stderr %q, stdout %.80q", sub, code, stderr, out)
		}
		if out2, _, code := run3(t, benchBin, "help", sub); code != 0 || out2 != out {
			t.Errorf("sluice-bench help %s: exit %d or a different help", sub, code)
		}
	}
	_, stderr, code = run3(t, benchBin, "sokak")
	if code != 2 || !strings.Contains(stderr, `did you mean "soak"?`) {
		t.Fatalf("unknown benchmark: exit %d, stderr %q", code, stderr)
	}
}

// `sluice bench ARGS` is `sluice-bench ARGS` when sluice-bench sits beside
// sluice: the same output and the same exit code.
func TestSluiceBenchRunsTheBenchBinary(t *testing.T) {
	for _, args := range [][]string{{"soak", "-h"}, {"help", "list"}, {"sokak"}} {
		want, wantErr, wantCode := run3(t, benchBin, args...)
		out, stderr, code := run3(t, sluiceBin, append([]string{"bench"}, args...)...)
		if out != want || stderr != wantErr || code != wantCode {
			t.Errorf("sluice bench %v: exit %d, stdout %.80q, stderr %.80q; sluice-bench: exit %d, stdout %.80q, stderr %.80q",
				args, code, out, stderr, wantCode, want, wantErr)
		}
	}
	if out, _, code := run3(t, sluiceBin, "help", "bench", "soak"); code != 0 || !strings.HasPrefix(out, "Usage: sluice-bench soak") {
		t.Errorf("sluice help bench soak: exit %d, stdout %.80q", code, out)
	}
}

// listed returns the names in the first column of an indented section of help text.
func listed(help, header string) []string {
	_, rest, ok := strings.Cut(help, header)
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(rest, "\n")[1:] {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	return names
}
