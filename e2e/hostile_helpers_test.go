package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/hostile"
)

// hostileBudget is the budget every hostile-neighbours attack is judged
// by: the canary's p99 at most 50 ms more than it is with no attack on the
// same machine in the same run (runHostile measures that control window
// first: on a quiet machine its p99 is a few milliseconds, so the bound is
// about 50 ms; while other work loads the machine the bound follows the
// machine's own noise instead of failing on it), the server under 512 MiB,
// its descriptors and goroutines back to their baseline within 30 s.
// SLUICE_HOSTILE_P99_MS sets the added 50 ms.
func hostileBudget() hostile.Budget {
	b := hostile.Budget{CanaryP99: 50 * time.Millisecond, RSS: 512 << 20}
	if v, err := strconv.Atoi(os.Getenv("SLUICE_HOSTILE_P99_MS")); err == nil && v > 0 {
		b.CanaryP99 = time.Duration(v) * time.Millisecond
	}
	return b
}

// runHostile starts one `sluice serve` (default limits plus args) and the
// canary, runs each attack in turn beside it and fails the test for every
// budget an attack broke. The table is logged either way.
func runHostile(t *testing.T, args []string, attacks ...hostile.Attack) []hostile.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := sluiceBin
	if b := os.Getenv("SLUICE_HOSTILE_BIN"); b != "" {
		bin = b // another build, for a before-and-after comparison
	}
	s, err := hostile.Start(ctx, hostile.Options{Binary: bin, Dir: t.TempDir(), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.Log())
		}
	}()
	c, err := s.StartCanary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	time.Sleep(500 * time.Millisecond) // the canary's connection is part of the baseline
	// The machine's own noise: the reference each attack's canary is judged against.
	control := hostile.Run(ctx, s, c, hostile.Idle(3*time.Second), hostileBudget())
	budget := hostileBudget()
	budget.CanaryP99 += control.Canary.P99
	t.Logf("control, no attack: canary %s; each attack's canary p99 may reach %s", control.Canary, budget.CanaryP99)
	var results []hostile.Result
	for _, a := range attacks {
		r := hostile.Run(ctx, s, c, a, budget)
		results = append(results, r)
		for _, p := range r.Problems() {
			t.Errorf("%s: %s", a.Name, p)
		}
	}
	t.Logf("hostile neighbours:\n%s", hostile.Table(results))
	return results
}
