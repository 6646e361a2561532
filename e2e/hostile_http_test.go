package e2e

import (
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/hostile"
)

// TestHostileNeighboursHTTP runs the HTTP-level attacks against one server
// with default limits, each beside the canary: floods of refused names and
// a full scrape, sockets that never read /metrics or a large answer, bodies
// that never end, forged-lifetime JWTs, a read-only token's pipeline on a
// missing database. Each must leave the canary's p99 within 50 ms, the
// server under 512 MiB, its descriptors and goroutines at their baseline,
// and every refusal naming its limit.
func TestHostileNeighboursHTTP(t *testing.T) {
	runHostile(t, nil,
		hostile.RefusedNamesOver(100_000, 2), // the full rate is `sluice bench hostile`'s
		hostile.NonReadingMetrics(4, 5*time.Second),
		hostile.NonReadingQuery(8, 200_000, 5*time.Second),
		hostile.SlowBodies(250, 90*time.Second),
		hostile.FutureJWT(),
		hostile.ReadOnlyPipeline(),
		hostile.UnauthenticatedReady("replica"),
	)
}

// TestHostileDatabasesPerToken: a token that creates databases in a loop is
// stopped at its limit, with an answer naming it, and another token is not.
func TestHostileDatabasesPerToken(t *testing.T) {
	runHostile(t, []string{"-max-databases-per-token", "20"}, hostile.DatabasesPerToken(20, 40))
}
