// Package engine captures an SQLite database's committed WAL frames into LTX
// files and ships them to a replica.Store with conditional creates; it also
// runs the sidecar's replication loop (sync interval, checkpoints, shutdown).
//
// Capture works beside any writer (another process, or the same process on its
// own connections): sluice only holds a read transaction, plus a write lock
// for a few milliseconds when it checkpoints.
//
// It imports replica, wal, superfly/ltx and zombiezen's SQLite; it never
// imports server or cmd. Compaction and retention live in package compact,
// which hooks in through Options.OnShip.
package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Options tunes a DB. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// CheckpointPages: PASSIVE checkpoint after shipping once the WAL holds
	// this many frames (default 1000).
	CheckpointPages int
	// TruncatePages: also try a TRUNCATE checkpoint once the WAL file is this
	// many frames long (default 10000).
	TruncatePages int
	// OnShip is called after every successful upload (metrics, compaction),
	// in TXID order and only once every earlier file is in the store (with
	// a pipeline, on the goroutine of the upload that completed the run).
	// It runs with the DB's lock held: it must not call back into the DB.
	// body is the file's bytes as uploaded when they are small (64 KiB at
	// most) and in memory, else nil (compaction keeps them for its merge).
	OnShip func(f replica.LTXFile, body []byte)
	// RequireMatch makes Open fail with ErrDiverged when the local database
	// differs from the replica, instead of shipping the difference.
	RequireMatch bool
	// UploadStall aborts an upload attempt that makes no progress for this
	// long (default 10s); the same file is retried with backoff while the
	// caller's context lasts (at most uploadAttempts times per call).
	UploadStall time.Duration
	// Pipeline is how many uploads Begin keeps in flight at once (at most
	// MaxPipeline); 0 or 1: one at a time.
	Pipeline int
	// RemoveInFlight makes Open delete the files a previous writer had in
	// flight past a TXID it never landed (replica.InFlightTail), when the
	// replica's lease was not released; set only by a writer that holds
	// the lease.
	RemoveInFlight bool
	// Verified are the files a restore that wrote this very database just
	// read and verified (restore.Result.Files), after it recorded its
	// position (RecordPosition). When the replica's newest file is one of
	// them, Open takes the replica's checksum from that record instead of
	// reading the file's trailer again: one GET fewer on a new lease
	// holder's way to its first write.
	Verified []replica.LTXFile
	// HandedPos, if set, is the replica's position as the previous lease
	// holder released it, shipped to the last TXID (lease.Final), with
	// this writer's lease taken from that very release: nobody wrote the
	// replica since, so Open does not list it (no in-flight tail to remove,
	// no newest file to read). A file past it would have been written by a
	// writer without the lease; the conditional create of this writer's
	// next file meets it and fences this writer, as always.
	HandedPos *ltx.Pos
	// CopyOfReplicaAt, if not 0, says the database file was built from
	// this replica's own files up to that TXID, each checked as a restore
	// checks it (a follower's copy that a new lease holder opens instead of
	// restoring the same state). When the replica's newest position is that
	// TXID, Open takes the file's checksum as the replica's, as it would a
	// restore's; at any other position the file differs from the replica.
	CopyOfReplicaAt ltx.TXID
}

const (
	defaultCheckpointPages = 1000
	defaultTruncatePages   = 10000
	defaultUploadStall     = 10 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CheckpointPages <= 0 {
		o.CheckpointPages = defaultCheckpointPages
	}
	if o.TruncatePages <= 0 {
		o.TruncatePages = defaultTruncatePages
	}
	if o.UploadStall <= 0 {
		o.UploadStall = defaultUploadStall
	}
	o.Pipeline = min(max(o.Pipeline, 1), MaxPipeline)
	return o
}

// ErrFenced means another writer already created the LTX file of the next
// TXID: this DB stops shipping for good (it never overwrites or forks).
// It wraps replica.ErrExists.
var ErrFenced = fmt.Errorf("replica fenced: another writer owns the next transaction: %w", replica.ErrExists)

// ErrDiverged means the local database differs from the replica's latest
// state and Options.RequireMatch forbids shipping the difference: restore the
// database from the replica, then open it again.
var ErrDiverged = errors.New("local database differs from the replica")

// ErrReplaced is returned when the database path no longer names the file
// being replicated (another file was renamed over it, or it was deleted): the
// replica holds the old file's history, not what the path now holds.
var ErrReplaced = errors.New("the database file was replaced while replicating")

// ErrLocalDisk marks a failure to keep a captured file on the local disk
// (full, or read-only) until it ships: the replica is not at fault.
var ErrLocalDisk = errors.New("the local disk cannot hold the captured changes")

// ErrNotDatabase is returned when the file at the database path is not an
// SQLite database (or is damaged past opening): no retry can ship it.
var ErrNotDatabase = errors.New("not an SQLite database")
