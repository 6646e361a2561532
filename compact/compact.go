// Package compact bounds a replica's footprint: it merges level-0 LTX files
// into coarser levels and periodic level-9 snapshots, and deletes what the
// retention window no longer needs, working from the store alone (never the
// local database) so it also handles replicas Litestream wrote.
//
// It imports replica, restore (for the restore chain it must never break) and
// github.com/superfly/ltx; never engine, server or cmd.
package compact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Level is one compaction level: every Interval (aligned to the clock, as
// Litestream does) the files of the level below are merged into one file here.
type Level struct {
	Level    int
	Interval time.Duration
}

// Config tunes compaction and retention. Zero values take the defaults.
type Config struct {
	Levels           []Level       // default {1, 30s}, {2, 5m}, {3, 1h}
	SnapshotInterval time.Duration // default 1h: a level-9 snapshot this often
	Retention        time.Duration // default 24h: keep what restores any point in this window
	L0Retention      time.Duration // default 5m: level-0 files compacted into level 1 are deleted after this
	// L0Trigger compacts level 1 as soon as more than this many level-0
	// files wait for it, whatever the clock says (default 256), so a burst
	// of writes never leaves thousands of small files behind.
	L0Trigger int
	// FanIn is the most inputs a merge has open at once (default 32,
	// at most the budget's size); longer chains merge in rounds.
	FanIn int
	// CallTimeout aborts a store call that makes no progress for this long
	// (default 30s); the pass fails and is retried later with backoff.
	CallTimeout time.Duration
	// Budget bounds the store requests compaction has in flight (default
	// replica.BackgroundBudget, shared by every compactor of the process).
	Budget *replica.Budget
	// TempDir holds merge scratch files (default: the system temp directory).
	TempDir string
	// Deleter deletes what retention no longer needs in the background
	// (nil: the pass deletes, and waits for the store).
	Deleter *Deleter
	// Bodies keeps small level-0 files as uploaded for the level-1 merge
	// (default DefaultBodies, shared by every compactor of the process).
	Bodies *BodyCache
	// OnDamage learns each damaged object once, when a second read has
	// confirmed it (the writer heals: see Healed). It must not block.
	OnDamage func(*replica.DamageError)
}

// Defaults (documented in the README's config reference).
var (
	DefaultLevels           = []Level{{1, 30 * time.Second}, {2, 5 * time.Minute}, {3, time.Hour}}
	DefaultSnapshotInterval = time.Hour
	DefaultRetention        = 24 * time.Hour
	DefaultL0Retention      = 5 * time.Minute
	DefaultL0Trigger        = 256
	DefaultFanIn            = 32
	DefaultCallTimeout      = 30 * time.Second
)

// maxInputs caps one write's chain, so that a huge backlog is worked off in
// several passes (each one a bounded amount of work) rather than one.
const maxInputs = 4096

func (c Config) withDefaults() Config {
	if len(c.Levels) == 0 {
		c.Levels = DefaultLevels
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.L0Retention <= 0 {
		c.L0Retention = DefaultL0Retention
	}
	if c.L0Trigger <= 0 {
		c.L0Trigger = DefaultL0Trigger
	}
	if c.FanIn <= 1 {
		c.FanIn = DefaultFanIn
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Budget == nil {
		c.Budget = replica.BackgroundBudget
	}
	c.FanIn = max(2, min(c.FanIn, c.Budget.Size()))
	if c.Bodies == nil {
		c.Bodies = DefaultBodies
	}
	return c
}

func (c Config) validate() error {
	for i, l := range c.Levels {
		if l.Level != i+1 || l.Level >= replica.SnapshotLevel {
			return fmt.Errorf("compact: levels must be numbered 1, 2, ... up to %d in order; got level %d at position %d",
				replica.SnapshotLevel-1, l.Level, i+1)
		}
		if l.Interval <= 0 {
			return fmt.Errorf("compact: level %d needs a positive interval", l.Level)
		}
	}
	return nil
}

// deleteBatch is the most keys per Delete call (S3's DeleteObjects limit).
const deleteBatch = 1000

// Compactor compacts and prunes one replica. Notify and the passes may run
// on different goroutines.
type Compactor struct {
	store  replica.Store
	budget *replica.Budget
	cfg    Config
	cfgErr error
	log    *slog.Logger

	mu      sync.Mutex
	pending []replica.LTXFile // announced by Notify, not yet indexed
	// What a Scheduler reads to choose the next pass (under mu): kept by
	// Notify and at the end of every pass.
	covered     ltx.TXID  // level 1's newest TXID after the last pass
	behind      int       // level-0 files past covered: level 1's backlog
	behindSince time.Time // when the oldest of them was announced (zero: none)
	nextDue     time.Time // the next clock boundary of any schedule (zero: no pass yet)

	undeleted  []string         // retention's keys a background delete failed on (under mu)
	verified   map[string]int64 // level-0 keys (and sizes) a restore read whole and verified (under mu)
	tailEnd    ltx.TXID         // CheckTail judges the files up to here (TailEnd; under mu)
	tailEndSet bool

	passMu      sync.Mutex // one pass at a time; guards the fields below
	idx         *index
	lastCompact map[int]time.Time // per level (9 = snapshots): when it was last due
	quarantined map[string]bool   // damaged objects left out of merges until healed

	tail tailCheck
}

// New returns a compactor for store. Invalid levels make every pass fail
// with an error saying why.
func New(store replica.Store, cfg Config, logger *slog.Logger) *Compactor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	return &Compactor{store: store, budget: cfg.Budget, cfg: cfg, cfgErr: cfg.validate(), log: logger.With("replica", store.String()),
		lastCompact: map[int]time.Time{}, quarantined: map[string]bool{}, tail: tailCheck{done: make(chan struct{})}}
}

// NotifyBody is Notify for a file whose bytes, as uploaded, are at hand:
// the level-1 merge reads them from Config.Bodies instead of the store
// while they fit there.
func (c *Compactor) NotifyBody(f replica.LTXFile, body []byte) {
	c.Notify(f)
	c.cfg.Bodies.put(c, f.Key, body, time.Now())
}

// Close drops the bytes NotifyBody kept for this compactor; a pass after it
// reads its inputs from the store.
func (c *Compactor) Close() { c.cfg.Bodies.forget(c) }

// Notify tells the compactor about a level-0 file the capture uploaded. It
// never touches the store.
func (c *Compactor) Notify(f replica.LTXFile) {
	c.mu.Lock()
	c.pending = append(c.pending, f)
	if waitsForLevel1(f.MinTXID, f.MaxTXID, c.covered) {
		if c.behind == 0 {
			c.behindSince = time.Now()
		}
		c.behind++
	}
	c.mu.Unlock()
}

// waitsForLevel1 reports whether a level-0 file is level 1's work: past its
// newest TXID and not a full-database file (those go to the snapshot level).
func waitsForLevel1(min, max, covered ltx.TXID) bool {
	return min > 1 && max > covered
}

// reached is the newest TXID compacted into level or beyond it: a level's
// files may be gone once a higher level covers them (retention deletes
// superseded copies), but what they held is compacted all the same. What the
// retention base snapshot holds counts as reached too: retention deletes
// every compacted copy of it, and the newest level-0 file it keeps (see
// expired) must not be merged again and again.
func (c *Compactor) reached(level int, now time.Time) ltx.TXID {
	m := c.retentionBase(now).MaxTXID
	for _, l := range c.cfg.Levels {
		if l.Level >= level {
			m = max(m, c.idx.maxTXID(l.Level))
		}
	}
	return m
}

// Backlog reports how many level-0 files wait for level 1 and since when
// the oldest of them has waited (zero time: none). Exact after the first
// pass; before it, only the files announced since the compactor was made.
func (c *Compactor) Backlog() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.behind, c.behindSince
}

// NextDue is when the clock next makes a level, the snapshot or retention
// due; zero before the first pass (which lists the store).
func (c *Compactor) NextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextDue
}

// recordProgress refreshes what Backlog and NextDue report, after a pass
// at time now. Callers hold passMu.
func (c *Compactor) recordProgress(now time.Time) {
	if c.idx == nil {
		return
	}
	covered := c.reached(c.cfg.Levels[0].Level, now)
	n := 0
	for _, f := range c.idx.levels[0] {
		if waitsForLevel1(f.MinTXID, f.MaxTXID, covered) {
			n++
		}
	}
	next := now.Truncate(c.cfg.SnapshotInterval).Add(c.cfg.SnapshotInterval)
	for _, l := range c.cfg.Levels { // retention runs on level 1's schedule
		next = minTime(next, now.Truncate(l.Interval).Add(l.Interval))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.pending {
		if waitsForLevel1(f.MinTXID, f.MaxTXID, covered) {
			n++
		}
	}
	c.covered, c.behind, c.nextDue = covered, n, next
	switch {
	case n == 0:
		c.behindSince = time.Time{}
	case c.behindSince.IsZero():
		c.behindSince = time.Now()
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Run compacts on a one-second tick until ctx is cancelled. Passes with
// nothing to do make no store request. A failed pass is logged in one line
// and retried after a backoff (2s doubling to 5m) so that a sick store is
// not hammered by background work.
func (c *Compactor) Run(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var backoff time.Duration
	var retryAt time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if now.Before(retryAt) {
				continue
			}
			err := c.CompactOnce(ctx, now)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				backoff, retryAt = 0, time.Time{}
				continue
			}
			backoff = min(max(2*backoff, 2*time.Second), maxBackoff)
			retryAt = now.Add(backoff)
			c.log.Warn("compaction pass failed; will retry", "in", backoff.String(), "err", err)
		}
	}
}

const maxBackoff = 5 * time.Minute

// call runs one store request without a body under the budget and the call
// timeout.
func (c *Compactor) call(ctx context.Context, fn func(ctx context.Context) error) error {
	return c.callWithin(ctx, c.cfg.CallTimeout, fn)
}

// callWithin is call with its own timeout (a LIST of a large backlog is many
// pages, each a round trip).
func (c *Compactor) callWithin(ctx context.Context, d time.Duration, fn func(ctx context.Context) error) error {
	if err := c.budget.Acquire(ctx, 1); err != nil {
		return err
	}
	defer c.budget.Release(1)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := fn(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w (no answer within %s)", err, d)
	}
	return err
}

// Stats reports the replica's footprint as the compactor knows it (zero
// before the first pass).
func (c *Compactor) Stats() Stats {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if c.idx == nil {
		return Stats{}
	}
	return c.idx.stats()
}

// CompactOnce runs one pass at time now: compaction of every level that is
// due, a snapshot if due, then retention. The first pass lists the store;
// later passes work from memory and make no request unless there is work.
func (c *Compactor) CompactOnce(ctx context.Context, now time.Time) error {
	if c.cfgErr != nil {
		return c.cfgErr
	}
	c.passMu.Lock()
	defer c.passMu.Unlock()
	defer c.recordProgress(now)
	if err := c.sync(ctx, now); err != nil {
		return err
	}
	if err := c.checkTail(ctx, now); err != nil {
		return err
	}
	err := c.pass(ctx, now)
	var de *replica.DamageError
	if errors.As(err, &de) && c.damaged(ctx, de) {
		return nil // reported once; the next pass goes on without it
	}
	return err
}

// pass is CompactOnce's work once the index is current.
func (c *Compactor) pass(ctx context.Context, now time.Time) error {
	// Every step below decides from memory whether it has work; a pass with
	// nothing due makes no store request (ARCHITECTURE.md, invariant 4).
	for _, l := range c.cfg.Levels {
		if err := c.compactLevel(ctx, l, now); err != nil {
			return err // higher levels build on this one
		}
	}
	if err := c.snapshot(ctx, now); err != nil {
		return err
	}
	return c.enforceRetention(ctx, now)
}

// sync loads the index on the first pass (one listing) and indexes the files
// Notify announced since. Callers hold passMu.
func (c *Compactor) sync(ctx context.Context, now time.Time) error {
	if c.idx == nil {
		idx, err := c.loadIndex(ctx)
		if err != nil {
			return fmt.Errorf("compact: list %s: %w", c.store, err)
		}
		c.idx = idx
		for _, l := range c.cfg.Levels {
			if e, ok := idx.newest(l.Level); ok {
				c.lastCompact[l.Level] = e.written()
			}
		}
		if e, ok := idx.newest(replica.SnapshotLevel); ok {
			c.lastCompact[replica.SnapshotLevel] = e.written()
		}
	}
	c.mu.Lock()
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, f := range pending {
		c.idx.add(newEntry(f, now))
	}
	return nil
}

// ErrFlushTooLarge is Flush's answer when level 0 holds more than it was
// allowed to merge: a stopping process would be killed part-way through, so
// the files are left for the next pass (the replica is complete either way).
var ErrFlushTooLarge = errors.New("level 0 is too large to merge now")

// Flush merges every level-0 file not yet in level 1 into one level-1 file
// now, whatever the schedule. A sidecar calls it when it stops gracefully, so
// the next boot restores from a few objects instead of one per sync.
// maxBytes > 0 bounds the level-0 bytes it will merge: above it, it merges
// nothing and returns ErrFlushTooLarge.
func (c *Compactor) Flush(ctx context.Context, now time.Time, maxBytes int64) error {
	if c.cfgErr != nil {
		return c.cfgErr
	}
	c.passMu.Lock()
	defer c.passMu.Unlock()
	defer c.recordProgress(now)
	if err := c.sync(ctx, now); err != nil {
		return err
	}
	l1 := c.cfg.Levels[0]
	if waiting := c.waitingBytes(l1.Level, now); maxBytes > 0 && waiting > maxBytes {
		return fmt.Errorf("%w: %d bytes wait for level %d, the bound is %d", ErrFlushTooLarge, waiting, l1.Level, maxBytes)
	}
	for {
		inputs := c.inputsFor(l1.Level, now, time.Time{})
		if len(inputs) < 2 {
			return nil // nothing to gain from copying one file
		}
		if err := c.write(ctx, l1.Level, inputs, now); err != nil {
			return err
		}
	}
}
