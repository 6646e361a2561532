package groupcommit

import (
	"context"
	"log/slog"
	"time"
)

// traceShipment logs, at debug level, where the time of a pipelined
// upload's writes went: from the oldest request's arrival to its group's
// commit (joining a group, running it), from that commit to the upload's
// start (the gather window, a slot, room in the pipeline), the capture and
// start of the upload, the upload with the wait for every earlier one
// (the engine's "shipped" line splits the two), and answering the writes.
// Measured, not guessed: the figures behind the gather window.
// Called once the upload's wait returned (at acked), before its writes are
// answered; the function it returns logs after they were.
func (c *Committer) traceShipment(s *shipment, acked time.Time) func(err error) {
	if !c.log.Enabled(context.Background(), slog.LevelDebug) || len(s.groups) == 0 {
		return func(error) {}
	}
	n := 0
	var oldest time.Time
	for _, g := range s.groups {
		n += len(g.reqs)
		for _, r := range g.reqs {
			if oldest.IsZero() || r.queued.Before(oldest) {
				oldest = r.queued
			}
		}
	}
	first := s.groups[0].committed
	if oldest.IsZero() {
		oldest = first
	}
	return func(err error) {
		c.log.Debug("pipelined upload answered", "txid", uint64(s.txid),
			"requests", n, "groups", len(s.groups), "in_flight_before", s.ahead,
			"arrival_to_commit", first.Sub(oldest), "commit_to_start", s.start.Sub(first),
			"capture", s.begun.Sub(s.start), "upload_and_earlier", acked.Sub(s.begun),
			"answer", time.Since(acked), "failed", err != nil)
	}
}
