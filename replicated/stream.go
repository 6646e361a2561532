package replicated

import (
	"context"
	"time"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/replica"
)

// StreamOptions tune a Stream's loop (engine.SidecarOptions).
type StreamOptions struct {
	Interval    time.Duration // longest a change waits to be shipped [1s]
	ErrorBudget time.Duration // how long uploads may fail before Run gives up; 0: never
	OnResult    func(error)   // the outcome of every attempt that reached the store (readiness)
}

// Stream replicates a database another process writes: it waits for the
// file, ships every Interval until stopped, then ships what is left.
type Stream struct {
	core     *core
	rep      *engine.Sidecar
	interval time.Duration
}

// NewStream prepares the stream of the database at path.
func NewStream(path string, opts Options, so StreamOptions) *Stream {
	c := newCore(opts)
	if so.Interval <= 0 {
		so.Interval = time.Second
	}
	rep := engine.NewSidecar(path, c.store, engine.SidecarOptions{
		Interval:    so.Interval,
		Logger:      c.opts.Logger,
		ErrorBudget: so.ErrorBudget,
		OnResult:    so.OnResult,
		OnShip:      c.shipped,
	})
	c.snapshot = rep.Snapshot // the sidecar heals damage too (it acknowledges nothing)
	return &Stream{core: c, rep: rep, interval: so.Interval}
}

// Store is the replica as the stream writes it: once the lease is lost it
// refuses every write. A readiness probe goes through it so it reports what
// the stream would meet.
func (s *Stream) Store() replica.Store { return s.core.store }

// Health is the stream's current state (readiness, metrics).
func (s *Stream) Health() engine.Health { return s.rep.Health() }

// Run replicates until ctx ends, ships what is left, merges this run's
// level-0 files (bounded to half a second) and releases the lease. It
// returns an error matching engine.ErrFenced once another writer owns the
// replica or the lease is lost, and one matching
// engine.ErrReplicaUnavailable once uploads fail past the error budget.
// The compaction timer stops when ctx ends: a merge in progress gives way
// to the final upload.
func (s *Stream) Run(ctx context.Context) error {
	log, store := s.core.log, s.core.store
	s.core.start(ctx)
	log.Info("replicating", "replica", store.String(), "interval", s.interval)
	if err := s.rep.Run(ctx); err != nil {
		h := s.rep.Health()
		log.Error("stopped replicating; changes after shipped_txid are NOT in the replica",
			"replica", store.String(), "shipped_txid", h.Pos.TXID.String(), "unshipped_bytes", h.UnshippedBytes)
		s.core.finish(ctx, false, 0, nil)
		return err
	}
	h := s.rep.Health()
	s.core.finish(ctx, true, 0, nil)
	if h.Pos.TXID == 0 {
		log.Info("stopped; the database never existed, nothing to ship", "replica", store.String())
	} else {
		log.Info("stopped; every change is in the replica", "replica", store.String(), "shipped_txid", h.Pos.TXID.String())
	}
	return nil
}
