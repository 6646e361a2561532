package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// Damage: a merge input (or a file of the newest restore chain) that is
// corrupt, truncated or missing is read a second time; if that read fails
// the same way the object is damaged, not the connection. It is then
// reported once (one log line, Config.OnDamage), left out of every later
// merge (compaction goes on around it instead of retrying the same merge
// forever) and, once the writer has uploaded a snapshot that makes it
// unnecessary for the newest state (Healed), moved aside to
// sluice/damaged/<key> so no restore stumbles on it again.

// DamagedPrefix is where Healed moves damaged objects: kept for
// inspection, out of the LTX tree that restores read.
const DamagedPrefix = replica.SluiceDir + "/damaged/"

// tailCheck is the state of the check of the newest restore chain's
// level-0 files, which no compaction has read yet (files a previous run
// shipped): done once per compactor.
type tailCheck struct {
	mu   sync.Mutex
	done chan struct{} // closed once checked
}

// CheckTail reads and verifies, once, the level-0 files a restore of the
// newest state needs that no compaction has read yet, and checks that the
// newest state has an unbroken chain. Damage is reported through
// Config.OnDamage and is not an error; an error means the check could not
// be made (the store did not answer) and the next call tries again. A
// writer calls it before its first acknowledgement, so that it never
// acknowledges a TXID that a damaged file left by an earlier run makes
// unrestorable without knowing it.
func (c *Compactor) CheckTail(ctx context.Context) error {
	if c.tailChecked() {
		return nil
	}
	// A pass in progress checks the tail first: wait for that rather than
	// for the whole pass.
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if c.passMu.TryLock() {
			err := c.checkTail(ctx, time.Now())
			c.passMu.Unlock()
			return err
		}
		select {
		case <-c.tail.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (c *Compactor) tailChecked() bool {
	select {
	case <-c.tail.done:
		return true
	default:
		return false
	}
}

// checkTail is CheckTail's work. Callers hold passMu.
func (c *Compactor) checkTail(ctx context.Context, now time.Time) error {
	if c.tailChecked() || c.cfgErr != nil {
		return nil
	}
	if err := c.sync(ctx, now); err != nil {
		return err
	}
	files := c.tailFiles()
	if len(files) == 0 {
		c.markTailChecked()
		return nil
	}
	if from, to, ok := restore.Gap(files); ok {
		key := replica.LTXKey(0, from, to)
		c.report(&replica.DamageError{Key: key, Store: c.store.String(), What: "missing",
			Err: fmt.Errorf("no object holds TXIDs %s..%s (%d..%d), which the newest state needs", from, to, from, to)})
	}
	chain, err := restore.Chain(files, 0)
	if err != nil {
		chain = nil // the gap is reported; nothing more to read
	}
	var todo []replica.LTXFile
	for _, f := range chain {
		if f.Level == 0 && !c.cfg.Bodies.has(c, f.Key) && !c.wasVerified(f) {
			todo = append(todo, f)
		}
	}
	errs := make([]error, len(todo))
	bodies := make([][]byte, len(todo))
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.cfg.FanIn)
	for i, f := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var buf bytes.Buffer
			errs[i] = c.check(ctx, f, &buf)
			if errs[i] == nil && int64(buf.Len()) <= MaxCachedBody && f.MinTXID > 1 {
				bodies[i] = buf.Bytes()
			}
		}()
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		var de *replica.DamageError
		switch {
		case errors.As(err, &de):
			if !c.damaged(ctx, de) && first == nil {
				first = err
			}
		case err != nil:
			if first == nil {
				first = fmt.Errorf("compact: check %s: %w", todo[i].Key, err)
			}
		case bodies[i] != nil:
			// Checked as the level-1 merge would: it takes them from here.
			c.cfg.Bodies.put(c, todo[i].Key, bodies[i], now)
		}
	}
	if first != nil {
		return first
	}
	c.markTailChecked()
	return nil
}

// TailEnd sets the TXID the writer opened the replica at, before its first
// CheckTail: the check judges what earlier writers left, up to there. The
// files past it are this writer's own, and with pipelined uploads they land
// out of order: a listing taken meanwhile can show TXID N+2 without N+1,
// which is an upload in flight, not a missing object.
func (c *Compactor) TailEnd(txid ltx.TXID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tailEnd, c.tailEndSet = txid, true
}

// tailFiles is what CheckTail judges: the usable files, up to TailEnd.
// Callers hold passMu.
func (c *Compactor) tailFiles() []replica.LTXFile {
	files := c.usable()
	c.mu.Lock()
	end, set := c.tailEnd, c.tailEndSet
	c.mu.Unlock()
	if !set {
		return files
	}
	out := files[:0]
	for _, f := range files {
		if f.MinTXID <= end {
			out = append(out, f)
		}
	}
	return out
}

func (c *Compactor) markTailChecked() {
	c.tail.mu.Lock()
	defer c.tail.mu.Unlock()
	if !c.tailChecked() {
		close(c.tail.done)
	}
	c.mu.Lock()
	c.verified = nil // read by the check only
	c.mu.Unlock()
}

// usable is the index without the quarantined files. Callers hold passMu.
func (c *Compactor) usable() []replica.LTXFile {
	var out []replica.LTXFile
	for _, f := range c.idx.all() {
		if !c.quarantined[f.Key] {
			out = append(out, f)
		}
	}
	return out
}

// damaged confirms de with a second full read and, if it holds, reports it
// and leaves the object out of later merges. It returns false when the
// second read succeeded (the first failure was the connection's).
// Callers hold passMu.
func (c *Compactor) damaged(ctx context.Context, de *replica.DamageError) bool {
	if c.quarantined[de.Key] {
		return true
	}
	if f, ok := c.idx.find(de.Key); ok && de.What != "missing" {
		err := c.check(ctx, f, nil)
		var again *replica.DamageError
		if !errors.As(err, &again) {
			return false
		}
		de = again
	}
	c.report(de)
	return true
}

// check reads f whole under the budget (replica.CheckLTX), abandoning a
// read that makes no progress for CallTimeout.
func (c *Compactor) check(ctx context.Context, f replica.LTXFile, body *bytes.Buffer) error {
	if err := c.budget.Acquire(ctx, 1); err != nil {
		return err
	}
	defer c.budget.Release(1)
	_, _, err := replica.CheckLTX(ctx, c.store, f, body, c.cfg.CallTimeout)
	return err
}

// report quarantines and announces one damaged object. Callers hold passMu.
func (c *Compactor) report(de *replica.DamageError) {
	if c.quarantined[de.Key] {
		return
	}
	c.quarantined[de.Key] = true
	c.log.Error("replica object damaged: left out of compaction until the writer heals the replica with a snapshot",
		"key", de.Key, "damage", de.What, "err", de.Err)
	if c.cfg.OnDamage != nil {
		c.cfg.OnDamage(de)
	}
}

// Healed tells the compactor that snap, a snapshot of the whole database
// at its TXID, is in the store: the damaged objects at or below it are no
// longer needed by the newest state or any later one, so they are moved to
// DamagedPrefix (a copy, then a delete; a missing one has nothing to move)
// and compaction continues above the snapshot. It reports whether every
// damaged object is dealt with.
func (c *Compactor) Healed(ctx context.Context, snap replica.LTXFile) error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if c.idx != nil {
		c.idx.add(newEntry(snap, time.Now()))
	}
	var errs []error
	for key := range c.quarantined {
		_, _, max, err := replica.ParseLTXKey(key)
		if err != nil || max > snap.MaxTXID {
			continue
		}
		if err := c.retire(ctx, key); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(c.quarantined, key)
		if c.idx != nil {
			c.idx.remove(map[string]bool{key: true})
		}
	}
	c.markTailChecked()
	return errors.Join(errs...)
}

// retire moves a damaged object to DamagedPrefix.
func (c *Compactor) retire(ctx context.Context, key string) error {
	var body bytes.Buffer
	err := c.call(ctx, func(ctx context.Context) error {
		body.Reset()
		rc, err := c.store.Get(ctx, key)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = body.ReadFrom(rc)
		return err
	})
	if errors.Is(err, replica.ErrNotFound) {
		return nil // missing: nothing to move
	}
	if err == nil {
		err = c.call(ctx, func(ctx context.Context) error {
			_, err := c.store.PutIfAbsent(ctx, DamagedPrefix+key, bytes.NewReader(body.Bytes()), int64(body.Len()))
			if errors.Is(err, replica.ErrExists) {
				return nil
			}
			return err
		})
	}
	if err != nil && !errors.Is(err, replica.ErrUnavailable) && !errors.Is(err, replica.ErrStalled) && ctx.Err() == nil {
		// A body the store will not even give back: nothing worth keeping.
		c.log.Warn("could not keep a copy of the damaged object; deleting it", "key", key, "err", err)
	} else if err != nil {
		return fmt.Errorf("move damaged %s aside in %s: %w", key, c.store, err)
	}
	if err := c.call(ctx, func(ctx context.Context) error { return c.store.Delete(ctx, key) }); err != nil {
		return fmt.Errorf("delete damaged %s from %s: %w", key, c.store, err)
	}
	c.log.Info("damaged object moved aside: the snapshot replaces it for the newest state", "key", key, "to", DamagedPrefix+key)
	return nil
}
