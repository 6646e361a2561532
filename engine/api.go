// Package engine captures an SQLite database's committed WAL frames into LTX
// files and ships them to a replica.Store with conditional creates; it also
// runs the sidecar's replication loop (sync interval, checkpoints, shutdown).
//
// It imports replica, wal and compact; it never imports server or cmd.
package engine

// CONTRACT (implemented by the capture work; signatures are fixed so that the
// server and the CLI can code against them):
//
//	type Options struct {
//		Logger          *slog.Logger
//		CheckpointPages int           // PASSIVE checkpoint after shipping once the WAL holds this many pages (default 1000)
//		TruncatePages   int           // TRUNCATE checkpoint past this many pages (default 10000)
//		OnShip          func(replica.LTXFile) // called after every successful upload (metrics, compaction)
//	}
//	func Open(ctx context.Context, path string, store replica.Store, opts Options) (*DB, error)
//	func (db *DB) Sync(ctx context.Context) (ltx.Pos, error) // ship every committed frame as one LTX file (no-op if none); safe for concurrent use
//	func (db *DB) Pos() ltx.Pos                             // last position accepted by the store
//	func (db *DB) Checkpoint(ctx context.Context) error     // ship, then checkpoint under a milliseconds-long write lock
//	func (db *DB) Close(ctx context.Context) error          // final Sync, then release every lock
//	var ErrFenced error                                     // wraps replica.ErrExists: another writer owns the next TXID; the DB stops shipping
