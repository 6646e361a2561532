// Package groupcommit is the write path of one served database: concurrent
// writes form one transaction on the database's writer connection (group
// commit), each group is shipped by one upload shared with the groups
// committed meanwhile, and each write is answered after that.
//
// Its invariant (ARCHITECTURE.md, "Never acknowledge what the bucket may not
// have"): with Sync durability a write is acknowledged only after the upload
// holding its commit succeeded; a write that committed locally but could not
// be uploaded is answered with a *NotDurableError, never success.
//
// A Committer gets everything it needs at construction (Options) and knows
// nothing of the registry that holds it (server/dbhost).
package groupcommit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
)

// Durability says when a write is acknowledged.
type Durability int

const (
	// Sync answers a write once the LTX file holding it is in the bucket.
	Sync Durability = iota
	// Async answers after the local commit; a background loop uploads.
	Async
)

func (d Durability) String() string {
	if d == Async {
		return "async"
	}
	return "sync"
}

// Observer receives write-path events for metrics. Calls are synchronous
// and must be cheap.
type Observer interface {
	GroupCommitted(db string, requests int, d time.Duration)
	Synced(db string, d time.Duration, err error)
}

// AckObserver is an optional part of an Observer: it learns how many
// writes were acknowledged (sync: once uploaded; async: once committed), the
// denominator of the upload cost per write.
type AckObserver interface {
	WritesAcknowledged(db string, n int)
}

// Replica ships what is committed to the database file; *replicated.DB
// satisfies it.
type Replica interface {
	// Sync uploads everything committed so far and returns the shipped position.
	Sync(ctx context.Context) (ltx.Pos, error)
	// Pos is the last shipped position.
	Pos() ltx.Pos
	// Changed reports whether Sync has anything to upload, without a
	// store request.
	Changed() (bool, error)
}

// Options configure a Committer. Zero values get the defaults in brackets.
type Options struct {
	Name        string          // the database's name, for errors, logs and the Observer
	Writer      *sqlconn.Handle // the database's writer connection (sqlconn.SharedWriter)
	Replica     Replica
	ReplicaName string // the replica's address, for logs
	Logger      *slog.Logger
	Observer    Observer // nil: none
	Durability  Durability

	MaxGroupRequests int           // requests per write group [1000]
	UploadTimeout    time.Duration // per Sync [30s]
	// CommitWindow lets a sync write wait up to this long after its commit
	// for others to share its upload [0].
	CommitWindow time.Duration
	// Uploads bounds uploads across databases; nil: unbounded.
	Uploads *UploadSlots
	// ExternalPoll is how often, with nothing to ship, it looks for commits
	// other processes made to the file and ships them; <= 0: never.
	ExternalPoll time.Duration
	// IdempotencyWindow is how long an Idempotency-Key is remembered [24h].
	IdempotencyWindow time.Duration
	// Stall, if set, is told of every upload and says when the store
	// stopped answering; sync writes are then refused before they run
	// instead of hanging (stall.go). nil: writes wait for the upload.
	Stall Stall
	// WriteStallTimeout bounds a committed sync write's wait for its upload
	// while Stall says the store is stalled [DefaultWriteStallTimeout].
	WriteStallTimeout time.Duration
	// Turn, if set, orders the write groups with the database's interactive
	// sessions that write: each group takes it for its transaction.
	Turn *Turn
	// Pipeline is how many uploads may be in flight at once when the
	// Replica is a PipelinedReplica (pipeline.go); <= 1: one at a time.
	Pipeline int
	// PipelineGather is how long, while an earlier upload is in flight, the
	// next group waits after its first request for more (gather.go) [0: a
	// sixteenth of the recent upload time, at most 10ms; < 0: never].
	PipelineGather time.Duration
}

// ErrClosed answers a Submit made after Close began.
var ErrClosed = errors.New("groupcommit: closed")

// Committer runs one database's write path: a writer goroutine that runs
// write groups and a shipper goroutine that makes them durable.
type Committer struct {
	opts Options
	name string
	log  *slog.Logger

	gate    sync.RWMutex // Submit holds it shared while enqueueing; Close takes it to stop intake
	closed  bool
	writeCh chan *writeReq
	shipCh  chan *group
	pace    uploadPace    // lets the writer group requests while an upload runs
	done    chan struct{} // closed when the writer and shipper have stopped
	pipe    *pipe         // nil: one upload at a time

	fenced atomic.Bool

	// Groups the writer began and ended (committed, handed to the shipper
	// or answered): the shipper's poll for other processes' commits skips
	// while they differ, so it never takes the writer's own commit for one.
	groupsBegun, groupsEnded atomic.Uint64

	lossMu          sync.Mutex
	owed            int       // groups of failed pipelined uploads, shipped by the next success
	failLogged      string    // the pipelined upload failure last logged (one line per cause)
	unshipped       int       // commits not yet accepted by the store
	oldestUnshipped time.Time // when the oldest of them committed

	idemPruned time.Time // last prune of expired idempotency keys (writer goroutine only)

	// Groups taken from shipCh while a stalled upload ran, for the next
	// upload, and whether shipCh was found closed (shipper goroutine only).
	carried       []*group
	carriedClosed bool
}

// writeReq is one Submit waiting for its group.
type writeReq struct {
	queued time.Time // when Submit was called: a stalled write's wait counts from it
	ctx    context.Context
	fn     func(sqlconn.Conn) error
	idem   *idemCall // nil without an Idempotency-Key
	err    error
	txid   ltx.TXID
	done   chan struct{}
}

// group is one committed transaction: the requests it answers and when it committed.
type group struct {
	reqs      []*writeReq
	committed time.Time // after its COMMIT returned
}

// New starts the write path of one database.
func New(opts Options) *Committer {
	if opts.MaxGroupRequests <= 0 {
		opts.MaxGroupRequests = 1000
	}
	if opts.UploadTimeout <= 0 {
		opts.UploadTimeout = 30 * time.Second
	}
	if opts.IdempotencyWindow <= 0 {
		opts.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if opts.WriteStallTimeout <= 0 {
		opts.WriteStallTimeout = DefaultWriteStallTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Committer{opts: opts, name: opts.Name, log: opts.Logger,
		writeCh: make(chan *writeReq, 4*opts.MaxGroupRequests),
		shipCh:  make(chan *group, 1024),
		done:    make(chan struct{})}
	c.pipe = c.newPipe()
	go c.runWriter()
	go c.runShipper()
	return c
}

// Submit queues fn for the next write group and waits until the group is
// durable (Sync) or committed (Async); it returns the position (TXID) the
// write is durable at. fn may be called more than once (the group is re-run
// without a failed request). A ctx made with WithIdempotency stores the
// answer with the write and replays it for a retry with the same key.
func (c *Committer) Submit(ctx context.Context, fn func(sqlconn.Conn) error) (ltx.TXID, error) {
	if c.fenced.Load() {
		return 0, FencedError(c.name)
	}
	if err := c.stalled(); err != nil {
		return 0, stalledError(c.name, err)
	}
	req := &writeReq{queued: time.Now(), ctx: ctx, fn: fn, idem: newIdemCall(ctx), done: make(chan struct{})}
	c.gate.RLock()
	if c.closed {
		c.gate.RUnlock()
		return 0, ErrClosed
	}
	select {
	case c.writeCh <- req:
		c.gate.RUnlock()
	case <-ctx.Done():
		c.gate.RUnlock()
		return 0, sqlconn.Translate(ctx.Err())
	}
	select {
	case <-req.done:
		return req.txid, req.err
	case <-ctx.Done():
		// The request may still commit; the caller has gone, so nobody learns it.
		return 0, sqlconn.Translate(ctx.Err())
	}
}

// Close stops intake and returns once every queued write was run, shipped
// and answered (the writer and shipper have stopped). It may be called more
// than once.
func (c *Committer) Close() {
	c.gate.Lock()
	if !c.closed {
		c.closed = true
		close(c.writeCh)
	}
	c.gate.Unlock()
	<-c.done
}

// Fenced reports whether another writer owns the replica: the database
// takes no more writes.
func (c *Committer) Fenced() bool { return c.fenced.Load() }

// Fence stops the database from taking writes (its write role was lost).
func (c *Committer) Fence() { c.fenced.Store(true) }

// Busy reports whether requests are queued, groups wait to ship or an
// upload runs.
func (c *Committer) Busy() bool {
	return c.Queued() > 0 || len(c.shipCh) > 0 || c.pace.uploading.Load() || (c.pipe != nil && len(c.pipe.room) > 0)
}

// Queued is the number of requests waiting for the writer.
func (c *Committer) Queued() int { return len(c.writeCh) }

// Unshipped returns the commits not yet accepted by the store (the async
// loss window) and when the oldest of them committed (zero if none).
func (c *Committer) Unshipped() (n int, oldest time.Time) {
	c.lossMu.Lock()
	defer c.lossMu.Unlock()
	return c.unshipped, c.oldestUnshipped
}

func (c *Committer) noteCommitted(t time.Time) {
	c.lossMu.Lock()
	if c.unshipped == 0 {
		c.oldestUnshipped = t
	}
	c.unshipped++
	c.lossMu.Unlock()
}

func (c *Committer) noteShipped(n int) {
	c.lossMu.Lock()
	c.unshipped -= n
	if c.unshipped <= 0 {
		c.unshipped = 0
		c.oldestUnshipped = time.Time{}
	}
	c.lossMu.Unlock()
}

func (c *Committer) observeAcked(n int) {
	if a, ok := c.opts.Observer.(AckObserver); ok && n > 0 {
		a.WritesAcknowledged(c.name, n)
	}
}

func (c *Committer) position() ltx.TXID { return c.opts.Replica.Pos().TXID }

func (c *Committer) unavailable(msg string) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeUnavailable, c.name, "database "+quote(c.name)+": "+msg)
}
