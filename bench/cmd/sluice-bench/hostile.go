package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/hostile"
)

// sluice-bench hostile: the hostile-neighbours attacks of make test with
// larger counts, one `sluice serve` (default limits, file replica) and a
// canary querying its own database throughout. It prints one row per
// attack: the canary's p50/p99 during it, the server's peak RSS, its
// descriptors and goroutines before and after, refusals and the verdict.

func init() { benchCommands["hostile"] = runBenchHostile }

func runBenchHostile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	names := fs.Int("names", 300_000, "refused database names before the /metrics scrape")
	readers := fs.Int("readers", 16, "non-reading clients of the large query")
	rows := fs.Int("rows", 400_000, "rows of the large query")
	slow := fs.Int("slow", 500, "slow-body connections")
	hold := fs.Duration("hold", 20*time.Second, "how long non-reading sockets are held")
	perToken := fs.Int("databases-per-token", 50, "the server's -max-databases-per-token for the creation loop")
	p99 := fs.Duration("p99", 50*time.Millisecond, "the canary's p99 budget")
	rss := fs.Int64("rss-mib", 512, "the server's RSS budget, MiB")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-bench-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	s, err := hostile.Start(ctx, hostile.Options{Binary: sluice, Dir: work,
		Args: []string{"-max-databases-per-token", fmt.Sprint(*perToken)}})
	if err != nil {
		return err
	}
	defer s.Stop()
	c, err := s.StartCanary(ctx)
	if err != nil {
		return err
	}
	defer c.Stop()
	time.Sleep(time.Second)
	budget := hostile.Budget{CanaryP99: *p99, RSS: *rss << 20}
	fmt.Printf("sluice bench hostile: %s, canary on its own database every 5-25 ms; budget: canary p99 %s, RSS %d MiB\n",
		sluice, *p99, *rss)
	var results []hostile.Result
	failed := 0
	// The control first (the machine's own noise), Hrana's large answers
	// last: on a server that builds them whole (before they were capped
	// while stepped) the memory they take stays with the process and would
	// count against the attacks after them.
	for _, a := range []hostile.Attack{
		hostile.Idle(*hold),
		hostile.RefusedNames(*names),
		hostile.NonReadingMetrics(16, *hold),
		hostile.NonReadingQuery(*readers, *rows, *hold),
		hostile.SlowBodies(*slow, 2*time.Minute),
		hostile.FutureJWT(),
		hostile.ReadOnlyPipeline(),
		hostile.DatabasesPerToken(*perToken, 2**perToken),
		hostile.UnauthenticatedReady("replica"),
		hostile.NonReadingHrana(*readers, *rows, *hold, "/v3/pipeline"),
		hostile.NonReadingHrana(*readers/2, *rows, *hold, "/v3/cursor"),
	} {
		fmt.Printf("  %s ...\n", a.Name)
		r := hostile.Run(ctx, s, c, a, budget)
		if len(r.Problems()) > 0 {
			failed++
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Print(hostile.Table(results))
	if failed > 0 {
		return fmt.Errorf("%d of %d attacks broke the budget:\n%s", failed, len(results), problems(results))
	}
	return nil
}

func problems(rs []hostile.Result) string {
	var b strings.Builder
	for _, r := range rs {
		for _, p := range r.Problems() {
			fmt.Fprintf(&b, "  %s: %s\n", r.Attack, p)
		}
	}
	return b.String()
}
