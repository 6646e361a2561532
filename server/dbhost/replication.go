package dbhost

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/server/groupcommit"
)

// Replication says how the host replicates and restores its databases.
// Each open database is one replicated.DB (capture, ship, compaction, the
// lease guard); Restore is a field so tests can count or refuse restores.
type Replication struct {
	// Logger is the engine's (it adds each database's path itself).
	Logger *slog.Logger
	// Restore writes the replica's latest state to path (which must not
	// exist); an empty replica is an error matching restore.ErrNoReplica.
	Restore func(ctx context.Context, store replica.Store, path string) error
	// Compaction compacts and prunes each open database's replica. Nil: none.
	Compaction *replicated.Compaction
	// verified carries the files Restore read and verified to the
	// replication opened next on the same path (verified.go); nil: none
	// (a Restore of a test's own).
	verified *verifiedFiles
}

func (r Replication) fenced(err error) bool { return errors.Is(err, engine.ErrFenced) }

func (r Replication) diverged(err error) bool { return errors.Is(err, engine.ErrDiverged) }

func (r Replication) noReplica(err error) bool { return errors.Is(err, restore.ErrNoReplica) }

var errNoReplication = errors.New("dbhost: Options.Replication.Restore is not set")

// openReplication starts replicating db (see replicated.Open). With leases,
// its writes go through its lease's guard, and losing the lease demotes it.
func (h *Host) openReplication(ctx context.Context, db *database) (*replicated.DB, error) {
	adopted := h.takeAdopted(db.path)
	opts := replicated.Options{
		Name:         db.name,
		Logger:       h.opts.Replication.Logger,
		Store:        db.store,
		RequireMatch: h.opts.Durability == groupcommit.Sync,
		Compaction:   h.opts.Replication.Compaction,
		Damage:       h.opts.Damage,
		Pipeline:     h.opts.UploadPipeline,
		Verified:     h.opts.Replication.verified.take(db.path),
		// A follower's copy adopted as the file (adopt.go).
		HandedPos:       adopted.handed,
		CopyOfReplicaAt: adopted.at,
		Followed:        func() bool { return h.opts.Followed != nil && h.opts.Followed(db.name) },
		Successor: func(accept func(lease.Successor) bool) (lease.Successor, bool) {
			if h.opts.Successor == nil {
				return lease.Successor{}, false
			}
			return h.opts.Successor(db.name, accept)
		},
		OnReleased: func(rec lease.Record) {
			if h.opts.OnReleased != nil {
				h.opts.OnReleased(db.name, rec)
			}
		},
		OnShip: func(f replica.LTXFile) {
			if h.opts.Observer != nil {
				h.opts.Observer.Shipped(db.name, f)
			}
		},
	}
	if h.opts.OnShipped != nil {
		name := db.name
		opts.OnShipBody = func(f replica.LTXFile, body []byte) { h.opts.OnShipped(name, f, body) }
	}
	if h.leases != nil {
		if l := h.leases.Lease(db.name); l != nil {
			opts.Lease = l
			opts.OnLeaseLost = func(cause error) { h.demote(db, l, cause) }
			opts.OnHandOver = func() { h.handOver(db, l) }
			opts.OnHistoryTaken = func(cause error) { h.adoptHistory(db, l, cause) }
		}
	}
	return replicated.Open(ctx, db.path, opts)
}
