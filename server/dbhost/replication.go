package dbhost

import (
	"context"
	"errors"

	"github.com/sluicedb/sluice/replica"
	"github.com/superfly/ltx"
)

// Replicator is what a hosted database needs from the capture engine
// (engine.DB): ship every committed frame as one LTX file, report the
// shipped position, and stop.
type Replicator interface {
	Sync(ctx context.Context) (ltx.Pos, error)
	Pos() ltx.Pos
	Close(ctx context.Context) error
}

// Replication connects the host to the engine, restore and compaction. The
// functions are injected (see EngineReplication) so this package's write
// path reads on its own and the wiring lives in one place.
type Replication struct {
	// Open starts capturing path into store. With requireMatch it fails with an
	// error for which IsDiverged is true when the local file and the replica differ.
	Open func(ctx context.Context, path string, store replica.Store, requireMatch bool, onShip func(replica.LTXFile)) (Replicator, error)
	// Restore writes the replica's latest state to path (which must not
	// exist); an empty replica is an error for which IsNoReplica is true.
	Restore func(ctx context.Context, store replica.Store, path string) error
	// Compact starts compaction and retention for one database's replica;
	// notify receives each shipped file. stop(true) ends it, perhaps merging
	// what the database shipped afterwards; stop(false) returns only once
	// nothing of it writes the replica any more. Nil: none.
	Compact func(store replica.Store, name string) (notify func(replica.LTXFile), stop func(flush bool))

	IsFenced, IsDiverged, IsNoReplica func(error) bool
}

func (r Replication) fenced(err error) bool {
	return err != nil && r.IsFenced != nil && r.IsFenced(err)
}

func (r Replication) diverged(err error) bool {
	return err != nil && r.IsDiverged != nil && r.IsDiverged(err)
}

func (r Replication) noReplica(err error) bool {
	return err != nil && r.IsNoReplica != nil && r.IsNoReplica(err)
}

var errNoReplication = errors.New("dbhost: Options.Replication.Open is not set")
