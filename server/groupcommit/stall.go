package groupcommit

import (
	"strconv"
	"time"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/superfly/ltx"
)

// Writes while the store hangs. A store that stops answering (a paused
// process, a lost write quorum) does not fail uploads: they wait for their
// deadlines. Without a bound every sync write would hang that long. So,
// with a Stall gauge (Options.Stall, the server's *watch.Watch):
//
//   - while the store is stalled, a write is refused before it runs: 503
//     UNAVAILABLE with Retry-After, nothing committed, safe to retry as is;
//   - a write that already committed and waits for its upload is answered
//     once it has waited Options.WriteStallTimeout while the store is
//     stalled: COMMITTED_NOT_DURABLE with its bookmark, as for a failed
//     upload, because its commit is in the local database and ships when
//     the store answers (running it again would apply it twice; a retry
//     with the same Idempotency-Key replays it).

// Stall tells the write path when the store stopped answering.
type Stall interface {
	// Begin marks an upload as outstanding; end says it is over.
	Begin() (end func(err error))
	// Stalled is non-nil while the store does not answer.
	Stalled() error
	// StallThreshold is how long a request may be outstanding before the
	// store counts as stalled.
	StallThreshold() time.Duration
}

// DefaultWriteStallTimeout is Options.WriteStallTimeout's default.
const DefaultWriteStallTimeout = 5 * time.Second

// stalled returns why sync writes cannot be acknowledged now, or nil.
func (c *Committer) stalled() error {
	if c.opts.Stall == nil || c.opts.Durability != Sync {
		return nil
	}
	return c.opts.Stall.Stalled()
}

// stalledError refuses a write that was not run: the store is stalled.
func stalledError(db string, cause error) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeUnavailable, db, "database "+quote(db)+": "+cause.Error()+
		"; the write was not run (nothing was committed): retry later")
}

// stalledNotDurable answers a committed write whose upload has waited past
// the write stall timeout on a stalled store.
func stalledNotDurable(db string, txid ltx.TXID, waited time.Duration, cause error) *NotDurableError {
	n := strconv.FormatUint(uint64(txid), 10)
	return &NotDurableError{TXID: txid, Err: dberr.ForDatabase(dberr.CodeNotDurable, db,
		"database "+quote(db)+": the write was committed locally but its upload has waited "+waited.Round(100*time.Millisecond).String()+
			" for the replica ("+cause.Error()+"); it is kept and shipped when the store answers, so do not run it again: it is durable once the database's durable bookmark reaches "+
			n+" (GET /v1/databases/"+db+"/bookmark/"+n+"), or retry with the same Idempotency-Key")}
}

// captured is the newest TXID captured so far (shipped or not), when the
// replica tells it, else the shipped position.
func (c *Committer) captured() ltx.TXID {
	if cr, ok := c.opts.Replica.(interface{ Captured() ltx.TXID }); ok {
		return cr.Captured()
	}
	return c.position()
}

// answerOverdue answers, while the Sync of groups runs, each of their
// requests that has waited WriteStallTimeout since it was submitted while
// the store is stalled; their commits ship as TXID txid (the Sync's own
// capture, or the next one's if it fails first). While stalled it also
// takes the groups committed meanwhile from shipCh (they would wait for the
// stuck upload to give up) and answers theirs alike, when the engine's
// capture marks place their commit in a TXID (bookmarkOf). stop ends it and
// returns those groups, for the next upload, and whether shipCh was closed;
// answered requests are dropped from their group.
func (c *Committer) answerOverdue(groups []*group, txid ltx.TXID) (stop func() ([]*group, bool)) {
	return c.overdue(groups, txid, true)
}

// answerOverdueOwn is answerOverdue for an upload in a pipeline: the
// shipper keeps taking the groups committed meanwhile, so only groups'
// own requests are answered.
func (c *Committer) answerOverdueOwn(groups []*group, txid ltx.TXID) (stop func()) {
	s := c.overdue(groups, txid, false)
	return func() { s() }
}

func (c *Committer) overdue(groups []*group, txid ltx.TXID, carry bool) (stop func() ([]*group, bool)) {
	wait := c.opts.WriteStallTimeout
	if c.opts.Stall == nil || c.opts.Durability != Sync || wait <= 0 {
		return func() ([]*group, bool) { return nil, false }
	}
	var carried []*group
	closed := false
	quit, done := make(chan struct{}), make(chan struct{})
	answer := func(gs []*group, now time.Time, stall error, bookmark func(*group) (ltx.TXID, bool)) (next time.Time) {
		for _, g := range gs {
			kept := g.reqs[:0]
			for _, r := range g.reqs {
				due := r.queued.Add(wait)
				if stall != nil && !now.Before(due) {
					if b, ok := bookmark(g); ok {
						finish(r, b, stalledNotDurable(c.name, b, now.Sub(r.queued), stall))
						continue
					}
				}
				kept = append(kept, r)
				if next.IsZero() || due.Before(next) {
					next = due
				}
			}
			g.reqs = kept
		}
		return next
	}
	go func() {
		defer close(done)
		for {
			now := time.Now()
			stall := c.stalled()
		drain:
			for carry && stall != nil && !closed {
				select {
				case g, ok := <-c.shipCh:
					if !ok {
						closed = true
						break drain
					}
					carried = append(carried, g)
				default:
					break drain
				}
			}
			next := answer(groups, now, stall, func(*group) (ltx.TXID, bool) { return txid, true })
			if n := answer(carried, now, stall, c.bookmarkOf); !n.IsZero() && (next.IsZero() || n.Before(next)) {
				next = n
			}
			// Past due on a store that answers (slowly), or nothing left:
			// look again soon, in case the store stalls or groups arrive.
			d := 200 * time.Millisecond
			if !next.IsZero() {
				d = min(max(time.Until(next), 100*time.Millisecond), d)
			}
			select {
			case <-quit:
				return
			case <-time.After(d):
			}
		}
	}()
	return func() ([]*group, bool) { close(quit); <-done; return carried, closed }
}

// bookmarkOf places group g's commit in a TXID from the engine's capture
// marks: in the latest capture's TXID if it ended before that capture
// began, else in the next one. A commit that overlapped the capture's
// boundary may be in the capture itself; the next TXID is then one too far,
// which is safe (reaching it still proves the commit durable) though it
// may come only with a later write; a retry with the same Idempotency-Key
// settles it at once. Without marks the request waits for the upload.
func (c *Committer) bookmarkOf(g *group) (ltx.TXID, bool) {
	lc, ok := c.opts.Replica.(interface{ LastCapture() engine.CaptureMark })
	if !ok {
		return 0, false
	}
	m := lc.LastCapture()
	switch {
	case m.TXID == 0: // no capture since the database opened: the first one holds it
		return c.captured() + 1, true
	case g.committed.Before(m.Began):
		return m.TXID, true
	}
	return m.TXID + 1, true
}

// stallWake returns a channel that fires once the upload in flight has
// been outstanding for the stall threshold (nil without a gauge or upload):
// a writer gathering requests behind that upload then stops gathering, and
// runGroup refuses them instead of committing writes that cannot ship.
func (c *Committer) stallWake() (<-chan time.Time, func()) {
	if c.opts.Stall == nil || c.opts.Durability != Sync {
		return nil, func() {}
	}
	began := c.pace.began.Load()
	if began == 0 {
		return nil, func() {}
	}
	d := time.Until(time.Unix(0, began).Add(c.opts.Stall.StallThreshold()))
	t := time.NewTimer(max(d, time.Millisecond))
	return t.C, func() { t.Stop() }
}
