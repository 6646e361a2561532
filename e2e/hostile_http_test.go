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

// TestHostileHranaAnswers: sockets that post a Hrana pipeline (8) or cursor
// (4) asking for 200,000 rows and never read, each beside the canary. The
// statement past limits.max-response-bytes is stopped as its rows are
// stepped and refused inside the answer (the pipeline's result, the
// cursor's step_error), so a client that never reads pins a few KiB, not
// the rows it asked for; a reading client then gets the refusal naming the
// limit. Budgets as TestHostileNeighboursHTTP's.
func TestHostileHranaAnswers(t *testing.T) {
	runHostile(t, nil,
		hostile.NonReadingHrana(8, 200_000, 5*time.Second, "/v3/pipeline"),
		hostile.NonReadingHrana(4, 200_000, 5*time.Second, "/v3/cursor"),
	)
}
