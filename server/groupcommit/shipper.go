package groupcommit

import (
	"context"
	"errors"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/lease"
)

// runShipper makes committed groups durable. It takes every group committed
// so far, calls Sync once (one LTX file, one conditional upload for all of
// them), and answers their requests. Groups committed while an upload runs
// wait for the next one, so uploads and execution overlap. Before uploading
// it waits for the commit window (Options.CommitWindow) and for one of the
// upload slots shared across databases (Options.Uploads), taking the groups
// committed meanwhile into the same upload.
//
// A failed upload (sync mode) answers the group's requests
// COMMITTED_NOT_DURABLE (a NotDurableError with the commit's bookmark):
// their data is committed locally and the next successful Sync ships it, so
// a blind retry would apply them twice; the shipper retries with backoff
// even if no new write arrives. engine.ErrFenced stops the database from
// taking writes.
//
// While idle it polls for commits other processes made to the file
// (shipExternal), so they reach the replica without waiting for an API write.
func (c *Committer) runShipper() {
	defer close(c.done)
	if c.pipe != nil {
		defer func() { close(c.pipe.acks); <-c.pipe.done }()
	}
	var failed <-chan struct{} // a pipelined upload failed: start it again
	if c.pipe != nil {
		failed = c.pipe.fail
	}
	var pending []*group
	backoff := time.Duration(0)
	var retry <-chan time.Time
	var poll <-chan time.Time
	if c.opts.ExternalPoll > 0 {
		t := time.NewTicker(c.opts.ExternalPoll)
		defer t.Stop()
		poll = t.C
	}
	externalFailing := false
	open := true
	for open || len(pending) > 0 {
		if len(pending) == 0 || retry != nil {
			select {
			case <-poll:
				// An upload of other processes' commits takes a slot like any
				// other; the cheap check first keeps idle databases out of
				// the queue. Writes arriving meanwhile join pending, and
				// the next turn answers them.
				// While a group of the writer's own is running or queued, the
				// change is most likely its commit, which ships with it.
				mark, idle := c.writerIdle()
				if len(pending) == 0 && idle && c.pipeIdle() && !c.fenced.Load() && c.externalChanged() {
					var release func()
					release, pending, open = c.waitSlot(pending, open)
					externalFailing = c.shipExternal(externalFailing, mark)
					release()
				}
				continue
			case g, ok := <-c.shipCh:
				if !ok {
					open = false
					if retry != nil && len(pending) > 0 { // shutting down: one last attempt now
						retry = nil
					}
					continue
				}
				pending = append(pending, g)
				if retry != nil {
					continue
				}
			case <-retry:
				retry = nil
			case <-failed:
				if retry == nil { // start the failed upload again, with backoff
					backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
					retry = time.After(backoff)
				}
				continue
			}
		}
		if c.pipe != nil && retry == nil {
			select {
			case <-failed: // an upload failed: start it again after a backoff, as below
				backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
				retry = time.After(backoff)
				continue
			default:
			}
		}
		// Take everything committed so far: one Sync covers it all.
	drain:
		for open {
			select {
			case g, ok := <-c.shipCh:
				if !ok {
					open = false
					break drain
				}
				pending = append(pending, g)
			default:
				break drain
			}
		}
		// Hold the upload for the commit window, then for a slot among the
		// uploads of every database: commits made meanwhile join it instead of each
		// costing a PUT of their own.
		pending, open = c.waitWindow(pending, open)
		var release func()
		release, pending, open = c.waitSlot(pending, open)
		if c.pipe != nil {
			pending, open = c.waitRoom(pending, open)
			err := c.begin(pending, release)
			pending = nil
			if err == nil {
				if c.pipe.ok.Load() {
					backoff = 0
				}
				continue
			}
			if !c.fenced.Load() && open {
				backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second)
				retry = time.After(backoff)
			}
			continue
		}
		c.pace.start()
		err := c.ship(pending)
		c.pace.end()
		release()
		// Groups committed during a stalled upload, taken from shipCh
		// meanwhile (stall.go), ship next: their requests may still wait.
		carried, closed := c.carried, c.carriedClosed
		c.carried, c.carriedClosed = nil, false
		if closed {
			open = false
		}
		if err == nil || c.fenced.Load() {
			pending, backoff = carried, 0
			continue
		}
		if !open { // closing: the final Sync in Close retries once more
			pending = carried
			continue
		}
		// Keep the groups (their requests are already answered in sync mode)
		// so the loss window stays visible, and retry with backoff.
		for _, g := range pending {
			g.reqs = nil
		}
		pending = append(pending, carried...)
		backoff = min(max(2*backoff, 250*time.Millisecond), 5*time.Second) // writers wait for the retry: keep it short
		retry = time.After(backoff)
	}
}

// writerIdle reports whether no write group is running or waiting for the
// shipper, with the count of groups begun so far.
func (c *Committer) writerIdle() (uint64, bool) {
	begun := c.groupsBegun.Load()
	return begun, c.groupsEnded.Load() == begun && len(c.shipCh) == 0
}

// externalChanged reports whether the file holds commits not shipped yet;
// on an error it lets the Sync that follows report it.
func (c *Committer) externalChanged() bool {
	changed, err := c.opts.Replica.Changed()
	return changed || err != nil
}

// shipExternal ships commits that did not come through the writer: the
// engine's idle check is a look at the WAL header and the frame after its
// cursor, with no store request when nothing changed. It returns whether
// the attempt failed, so a replica outage is logged once, not every poll.
// mark is writerIdle's count from before the check: the log line names
// another process only if no group of the writer began since.
func (c *Committer) shipExternal(failing bool, mark uint64) bool {
	before := c.opts.Replica.Pos()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.UploadTimeout)
	end := c.beginUpload()
	pos, err := c.opts.Replica.Sync(ctx)
	cancel()
	end(err)
	switch {
	case err == nil:
		if now, idle := c.writerIdle(); pos.TXID != before.TXID && idle && now == mark {
			c.log.Info("shipped commits made to the database file by another process",
				"db", c.name, "from_txid", uint64(before.TXID)+1, "to_txid", uint64(pos.TXID))
		}
		return false
	case errors.Is(err, engine.ErrFenced):
		c.fenced.Store(true)
		c.log.Warn("this instance is no longer the database's writer; it takes no more writes",
			"db", c.name, "replica", c.opts.ReplicaName, "err", err)
	case !failing:
		c.log.Warn("shipping commits made to the file by another process failed; retrying every poll",
			"db", c.name, "replica", c.opts.ReplicaName, "err", err)
	}
	return true
}

// ship uploads everything committed and answers the groups.
func (c *Committer) ship(groups []*group) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.UploadTimeout)
	start := time.Now()
	end := c.beginUpload()
	// Every group here committed before this Sync, whose capture (or the
	// next one, if it fails first) ships them as the TXID after the newest
	// captured now.
	stopOverdue := c.answerOverdue(groups, c.captured()+1)
	pos, err := c.opts.Replica.Sync(ctx)
	cancel()
	c.carried, c.carriedClosed = stopOverdue()
	end(err)
	if c.opts.Observer != nil {
		c.opts.Observer.Synced(c.name, time.Since(start), err)
	}
	var answer error
	switch {
	case err == nil:
		c.noteShipped(len(groups))
	case errors.Is(err, engine.ErrFenced), errors.Is(err, lease.ErrLate):
		answer = c.refusedUpload(err, pos)
	default:
		c.log.Warn("upload failed; committed data stays local and is shipped by the next successful upload",
			"db", c.name, "replica", c.opts.ReplicaName, "err", err)
		// The next successful upload ships everything committed since pos as
		// the file ending at pos+1 or later: that is the commit's bookmark.
		answer = notDurable(c.name, pos.TXID+1, err)
	}
	b := pos.TXID
	if answer == nil {
		// Counted before anyone is answered: a client that reads /metrics
		// after its answer sees its own write.
		c.observeAcked(succeeded(groups))
	}
	for _, g := range groups {
		for _, r := range g.reqs {
			var nd *NotDurableError
			if errors.As(answer, &nd) {
				finish(r, nd.TXID, nd)
			} else if answer != nil {
				finish(r, 0, answer)
			} else {
				finish(r, b, r.err)
			}
		}
		g.reqs = nil
	}
	return err
}

// beginUpload tells the Stall gauge an upload is outstanding.
func (c *Committer) beginUpload() (end func(error)) {
	if c.opts.Stall == nil {
		return func(error) {}
	}
	return c.opts.Stall.Begin()
}

// refusedUpload answers the writes of an upload the store refused to another
// writer (fenced: not applied, retryable) or accepted only after this
// instance's lease deadline (in the history, possibly after another instance
// took the lease: not acknowledged, and never to be run again; the lease
// decides what follows, resumed or lost).
func (c *Committer) refusedUpload(err error, pos ltx.Pos) error {
	if errors.Is(err, engine.ErrFenced) {
		c.fenced.Store(true)
		c.log.Warn("this instance is no longer the database's writer: the upload was refused, its writes were not applied and are answered retryable",
			"db", c.name, "replica", c.opts.ReplicaName, "err", err)
		return FencedError(c.name)
	}
	c.log.Warn("upload accepted only after this instance's lease deadline; its writes are not acknowledged",
		"db", c.name, "replica", c.opts.ReplicaName, "txid", uint64(pos.TXID), "err", err)
	return lateUpload(c.name, pos.TXID)
}

// succeeded counts the requests of groups that ran without error: what an
// upload that landed acknowledges.
func succeeded(groups []*group) int {
	n := 0
	for _, g := range groups {
		for _, r := range g.reqs {
			if r.err == nil {
				n++
			}
		}
	}
	return n
}
