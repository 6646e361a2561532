package engine

import "sync/atomic"

// Stats counts what a DB's capture did since Open. Full reads are the cost to
// watch: a sidecar that keeps up never needs one after Open.
type Stats struct {
	Captures  int64 // LTX files captured from the WAL
	FullReads int64 // resynchronisations by reading the whole database (Open's first read excluded)
	Frames    int64 // WAL frames read by capture
}

type statCounters struct {
	captures, fullReads, frames atomic.Int64
}

// Stats returns the counters; it takes no lock.
func (db *DB) Stats() Stats {
	return Stats{
		Captures:  db.stats.captures.Load(),
		FullReads: db.stats.fullReads.Load(),
		Frames:    db.stats.frames.Load(),
	}
}
