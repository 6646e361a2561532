package embedded

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A short run with each real client (the libsql crate's built with cargo
// here, in the tools directory) against a real sluice serve on MinIO:
// every acknowledged row reaches every replica (Run checks), the lag is
// measured with sync() in a loop and through the waiting URL, a sync with
// nothing new is one request that moves nothing, and a sync after the
// commits moves about the pages they changed.
func TestShortRunWithEachClient(t *testing.T) {
	sluice := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-o", sluice, "./cmd/sluice")
	build.Dir, build.Stderr = "../..", os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("build sluice: %v", err)
	}
	python := "python3"
	if d := os.Getenv("SLUICE_TOOLS"); d != "" {
		python = filepath.Join(d, "venv", "bin", "python3")
	}
	for _, client := range Clients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			var out strings.Builder
			rep, err := Run(ctx, Options{Sluice: sluice, WorkDir: t.TempDir(), Client: client,
				NodeModules: DefaultNodeModules(), Python: python,
				Replicas: 2, Rows: 2000, Reads: 300, HranaReads: 30, Follow: time.Second, SyncWait: time.Second,
				EmptySyncs: 10, Commits: 20, ClientRTT: 2 * time.Millisecond}, io.MultiWriter(&out, testWriter{t}))
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if rep.EmptySyncs != 20 || rep.EmptySyncServerUs <= 0 {
				t.Fatalf("empty syncs: %d, %.0f µs each", rep.EmptySyncs, rep.EmptySyncServerUs)
			}
			if !strings.Contains(out.String(), "20 sync requests (1.00 per sync()), 0 bytes of pages moved") {
				t.Fatalf("an empty sync() is not one request moving nothing:\n%s", out.String())
			}
			if rep.CommitsChangedPages == 0 || rep.CommitsSyncBytesPerPage > TargetSyncOverPgs {
				t.Fatalf("a sync after 20 commits moved %d bytes for %d changed pages", rep.CommitsSyncBytes, rep.CommitsChangedPages)
			}
			if w := rep.WaitLag; w == nil || w.Pairs == 0 || w.P50ms <= 0 || w.Answers == "" {
				t.Fatalf("no lag measured through the waiting sync URL: %+v", w)
			}
			// Reads across the added round trip pay it at least once each.
			if rep.HranaRequestsPerRead < 1 || rep.FarP50us < 2000 || rep.FarRatio <= 0 {
				t.Fatalf("Hrana reads: %.2f requests per read, p50 %.0f µs on loopback and %.0f µs across 2 ms (ratios %.0f×, %.0f×)",
					rep.HranaRequestsPerRead, rep.AloneHranaP50us, rep.FarP50us, rep.AloneRatio, rep.FarRatio)
			}
			if rep.WritesAcked == 0 || rep.LagP50ms <= 0 {
				t.Fatalf("the writer: %d acknowledged, lag p50 %.1f ms", rep.WritesAcked, rep.LagP50ms)
			}
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
