package dbhost

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/coldopen"
	"github.com/sluicedb/sluice/server/groupcommit"
)

// Observer receives write-path events for metrics: the write path's
// (groupcommit.Observer, optionally groupcommit.AckObserver) and each
// shipped file. Calls are synchronous and must be cheap.
type Observer interface {
	groupcommit.Observer
	Shipped(db string, f replica.LTXFile)
}

// Options configure a Host. Zero values get the defaults in brackets.
type Options struct {
	DataDir          string
	Store            replica.Store // each database replicates to replica.Sub(Store, name)
	Replication      Replication
	Durability       groupcommit.Durability
	StatementTimeout time.Duration // per statement [5s]
	UploadTimeout    time.Duration // per Sync [30s]
	MaxGroupRequests int           // requests per write group [1000]
	ReadConns        int           // read connections per database [4]
	MaxSessions      int           // read-write interactive sessions per database [64]
	MaxReadSessions  int           // read-only interactive sessions per database, a separate budget [64]
	// MaxOpen caps the databases open at once; the least recently used idle
	// one is closed to open another (evict.go). [derived from the descriptor
	// limit, at most 256]
	MaxOpen int
	// IdleTimeout closes a database unused for this long [1m]; < 0: never.
	IdleTimeout time.Duration
	// IdleWriteTimeout rolls back an interactive transaction that holds the
	// write lock with no statement running for this long while other
	// writers wait (turn.go) [DefaultIdleWriteTimeout]; < 0: never.
	IdleWriteTimeout time.Duration
	// PinnedSessionIdle: when every open database is busy, one whose only
	// sessions have run nothing for this long and hold no transaction is
	// closed, sessions and all, to open another [DefaultPinnedSessionIdle].
	PinnedSessionIdle time.Duration
	Logger            *slog.Logger
	Observer          Observer
	// OnShipped, if set, learns every file a database shipped with its
	// body (the embedded-replica sync history). It runs on the shipping
	// goroutine: it must be quick and must not modify body.
	OnShipped func(db string, f replica.LTXFile, body []byte)
	// Lease, if set, makes this instance write a database only while it
	// holds the database's lease (see leases.go). Nil: no leases.
	Lease *lease.Options
	// FollowOnly: never write; answer every use with a *NotLeaderError
	// naming the lease holder (reads are the read replicas' to answer:
	// package server/followers).
	FollowOnly bool
	// OnWriterOpening, if set, is called with a database's name once this
	// instance holds its lease and before it restores the database: the
	// server drops its read replica of it there (the writer restores from
	// the bucket, at least as new).
	OnWriterOpening func(name string)
	// AdoptCopy, if set, is asked, when this instance took a database's
	// lease and has no local file, to move a copy of the database built
	// from the replica's own files to path (the server's follower of it:
	// package server/followers), at exactly txid when txid is not 0 (the
	// previous holder released the lease there: lease.Final). It returns the
	// TXID the copy is at and the level-0 files it was built from, each read
	// and checked, which the check before the first acknowledgement then
	// skips; false: there is none, and the database is restored from the
	// bucket. Sync durability only (adopt.go).
	AdoptCopy func(ctx context.Context, name, path string, txid uint64) (verified []replica.LTXFile, at uint64, ok bool)
	// Followed, if set, reports whether another instance keeps a copy of
	// the database current from this writer (replicated.Options.Followed).
	Followed func(name string) bool
	// Successor, if set, returns an instance waiting for the database's
	// lease that accept takes (replicated.Options.Successor).
	Successor func(name string, accept func(lease.Successor) bool) (lease.Successor, bool)
	// OnReleased, if set, hears the record a database's lease was released
	// or handed over with when it closed (replicated.Options.OnReleased).
	OnReleased func(name string, rec lease.Record)

	// Damage, if set, hears of damaged objects found in a database's
	// replica (by compaction, or by a restore on open) and of their healing.
	Damage replicated.DamageReporter

	// IdempotencyWindow is how long an Idempotency-Key is remembered [24h].
	IdempotencyWindow time.Duration

	// ExternalPoll is how often an open database with nothing to ship looks
	// for commits made to its file by other processes (an sqlite3 shell, a
	// migration tool) and ships them [1s]; < 0: never.
	ExternalPoll time.Duration
	// CommitWindow lets a sync write wait up to this long after its commit
	// for others to share its upload (fewer PUTs, more latency) [0].
	CommitWindow time.Duration
	// MaxUploads bounds the write-path uploads in flight across every
	// database; a database waiting for a slot keeps growing its next upload
	// [DefaultMaxUploads]; < 0: no bound.
	MaxUploads int
	// UploadPipeline is how many uploads of one database may be in flight
	// at once, each write acknowledged once its own upload and every
	// earlier one succeeded [DefaultUploadPipeline]; 1: one at a time.
	UploadPipeline int
	// Stall, if set, learns of every write-path upload and says when the
	// store stopped answering: sync writes are then refused before they run
	// (groupcommit.Options.Stall). The server passes its readiness watch.
	Stall groupcommit.Stall
	// WriteStallTimeout bounds a committed sync write's wait for its upload
	// while the store is stalled [groupcommit.DefaultWriteStallTimeout].
	WriteStallTimeout time.Duration
	// ColdOpen, if set, answers reads on a database that exists only in the
	// bucket at once, page by page, while it is restored (cold.go). Nil:
	// the first request waits for the whole restore.
	ColdOpen *coldopen.Options
}

// DefaultMaxUploads is Options.MaxUploads unless configured: enough to keep
// a remote store's round trips overlapped, few enough that a local one is not
// flooded with small PUTs from many databases at once.
const DefaultMaxUploads = 16

// DefaultUploadPipeline is Options.UploadPipeline unless configured: at a
// bucket's tens of milliseconds per PUT, enough uploads in flight for a
// write to wait about one PUT under load, and half of DefaultMaxUploads so
// one busy database leaves slots to the others.
const DefaultUploadPipeline = 8

// Defaults of Options' isolation settings: short enough that another
// client's writes wait well under a second behind a transaction someone
// walked away from, long enough for a client's round trip between two
// statements of a transaction.
const (
	DefaultIdleWriteTimeout  = 250 * time.Millisecond
	DefaultPinnedSessionIdle = time.Second
)

func (o *Options) setDefaults() {
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 30 * time.Second
	}
	if o.MaxGroupRequests <= 0 {
		o.MaxGroupRequests = 1000
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	if o.MaxReadSessions <= 0 {
		o.MaxReadSessions = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = defaultMaxOpen(o.ReadConns, descriptorLimit())
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = time.Minute
	}
	if o.IdleWriteTimeout == 0 {
		o.IdleWriteTimeout = DefaultIdleWriteTimeout
	}
	if o.PinnedSessionIdle <= 0 {
		o.PinnedSessionIdle = DefaultPinnedSessionIdle
	}
	if o.ExternalPoll == 0 {
		o.ExternalPoll = time.Second
	}
	if o.UploadPipeline <= 0 {
		o.UploadPipeline = DefaultUploadPipeline
	}
	if o.MaxUploads == 0 {
		o.MaxUploads = DefaultMaxUploads
	}
}
