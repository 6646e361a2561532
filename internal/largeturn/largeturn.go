// Package largeturn lets half the CPUs (at least one) build large answers
// at once, across the JSON API and Hrana: encoding rows is CPU work, and a
// few clients asking for megabytes at once would otherwise take every core
// from the short requests of everyone else. An answer takes a turn once it
// passes Size and keeps it until it is built.
package largeturn

import (
	"context"
	"runtime"
)

// Size is the answer size past which an answer being built takes a turn.
const Size = 1 << 20

// Slots holds one value per turn taken.
var Slots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// Take waits for a turn, and reports false when ctx ended first (the work is
// being stopped anyway).
func Take(ctx context.Context) bool {
	select {
	case Slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// Give returns a turn Take took.
func Give() { <-Slots }
