package replicated

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// Healing. Compaction reads what the writer shipped; when it meets a
// damaged, truncated or missing object (compact.Config.OnDamage) every TXID
// from that object on is unrestorable, although the writer's local file
// holds them all. The writer heals from that file: it uploads a snapshot of
// the whole database at its shipped TXID (engine.DB.Snapshot), after which
// the newest state and every later one restore without the damaged object,
// and compaction moves the object aside and goes on above the snapshot.
//
// Writes between detection and heal are held, not refused: Sync returns
// only once a snapshot covers its TXID (the heal runs inside the Sync of
// the first write that finds the replica damaged, and on its own goroutine
// at once for an idle database). A heal that fails fails that Sync (the
// write is answered as committed but not durable) and is tried again by the
// next one. Before its first acknowledgement the writer also waits for the
// check of the files an earlier run left unmerged (compact.CheckTail), so a
// damaged file found only after a restart never lets it acknowledge TXIDs a
// restore could not reach.

// DamageReporter hears of damaged replica objects and of their healing,
// for readiness and metrics (replica/watch.Damage).
type DamageReporter interface {
	Damaged(db string, err *replica.DamageError)
	Healed(db string, snapshot string, took time.Duration)
}

// healState is the damage reported and not yet healed (under mu).
type healState struct {
	mu       sync.Mutex
	reported int       // damage reports so far
	healed   int       // reports covered by a snapshot
	since    time.Time // when the oldest unhealed report came
	heal     sync.Mutex
}

// damaged records one report (compact.Config.OnDamage) and starts a heal.
func (c *core) damaged(de *replica.DamageError) {
	c.hs.mu.Lock()
	if c.hs.reported == c.hs.healed {
		c.hs.since = time.Now()
	}
	c.hs.reported++
	c.hs.mu.Unlock()
	if c.opts.Damage != nil {
		c.opts.Damage.Damaged(c.opts.Name, de)
	}
	if c.snapshot != nil && !c.closing.Load() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), healTimeout)
			defer cancel()
			if err := c.heal(ctx); err != nil {
				c.log.Warn("healing the damaged replica failed; the next write tries again", "err", err)
			}
		}()
	}
}

// healTimeout bounds a background heal (a snapshot of a large database).
const healTimeout = 10 * time.Minute

// unhealed reports whether damage waits for a snapshot.
func (c *core) unhealed() bool {
	c.hs.mu.Lock()
	defer c.hs.mu.Unlock()
	return c.hs.reported > c.hs.healed
}

// heal uploads a snapshot if damage waits for one. One heal at a time; a
// heal that finds the damage healed by another returns at once.
func (c *core) heal(ctx context.Context) error {
	c.hs.heal.Lock()
	defer c.hs.heal.Unlock()
	c.hs.mu.Lock()
	upTo, since := c.hs.reported, c.hs.since
	c.hs.mu.Unlock()
	if upTo == c.hs.healed || c.snapshot == nil {
		return nil
	}
	f, err := c.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("the replica is damaged and the snapshot that heals it could not be uploaded: %w", err)
	}
	// Moving the damaged objects aside waits for a compaction pass in
	// flight; the acknowledgement needs only the snapshot.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), healTimeout)
		defer cancel()
		if err := c.comp.Healed(ctx, f); err != nil {
			c.log.Warn("healed, but a damaged object could not be moved aside yet; the next heal tries again", "err", err)
		}
	}()
	c.hs.mu.Lock()
	c.hs.healed = upTo
	c.hs.mu.Unlock()
	took := time.Since(since)
	c.log.Info("replica healed: a snapshot of the local database replaces the damaged objects for the newest state",
		"snapshot", f.Key, "txid", f.MaxTXID.String(), "since_detected", took.Round(time.Millisecond).String())
	if c.opts.Damage != nil {
		c.opts.Damage.Healed(c.opts.Name, f.Key, took)
	}
	return nil
}

// restorable returns once every TXID shipped so far is restorable as far as
// this process knows: the unmerged files of earlier runs checked, and any
// damage healed. pos is what the caller is about to acknowledge.
func (c *core) restorable(ctx context.Context, pos ltx.Pos) error {
	if c.comp == nil || pos.TXID == 0 {
		return nil
	}
	if err := c.comp.CheckTail(ctx); err != nil {
		return fmt.Errorf("cannot confirm TXID %s is restorable: checking the replica's unmerged files: %w", pos.TXID, err)
	}
	if !c.unhealed() {
		return nil
	}
	return c.heal(ctx)
}
