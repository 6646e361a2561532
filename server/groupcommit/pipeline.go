package groupcommit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/engine"
	"github.com/sluicedb/sluice/lease"
	"github.com/superfly/ltx"
)

// Pipelined uploads. At a real bucket's latency (tens of milliseconds per
// conditional PUT) one upload at a time makes every write wait for the
// upload in flight and then for its own. With a replica that can start an
// upload without waiting for the earlier ones (PipelinedReplica), the
// shipper captures and starts the next group's upload at once, up to
// Options.Pipeline uploads in flight, and an acknowledger goroutine answers
// the shipments in order: each write once its own upload and every earlier
// one succeeded (the replica's wait says so). A failed upload answers its
// writes, and every later shipment's, COMMITTED_NOT_DURABLE; the shipper
// then starts it again (same TXID, same bytes) before anything later can be
// acknowledged.

// PipelinedReplica is a Replica that can keep several uploads in flight
// (*replicated.DB).
type PipelinedReplica interface {
	Replica
	// Begin captures what is committed and starts its upload; wait returns
	// once that upload and every earlier one succeeded, or with the first
	// error among them.
	Begin(ctx context.Context) (wait func(context.Context) (ltx.Pos, error), err error)
	// Pipelined reports whether Begin keeps more than one upload in flight.
	Pipelined() bool
}

// shipment is one started upload and the groups it answers.
type shipment struct {
	groups  []*group
	txid    ltx.TXID // where their commits are: the captured file's TXID
	wait    func(context.Context) (ltx.Pos, error)
	start   time.Time // when the shipper took the groups to upload
	begun   time.Time // when Begin returned: captured, upload started
	ahead   int       // uploads already in flight then
	release func()    // the upload slot shared across databases
	// From the upload's start: the stall gauge's mark, and the watch that
	// answers requests overdue on a stalled store (stall.go), whatever
	// shipment the acknowledger is waiting for meanwhile.
	endUpload   func(error)
	stopOverdue func()
}

// pipe is the shipper's side of the pipeline (nil: one upload at a time).
type pipe struct {
	depth int
	rep   PipelinedReplica
	room  chan struct{}  // one token per upload in flight
	acks  chan *shipment // to the acknowledger, in order
	fail  chan struct{}  // the acknowledger saw a failed upload: retry it
	ok    atomic.Bool    // the last upload the acknowledger waited for succeeded
	done  chan struct{}  // the acknowledger has stopped
	// upload is the recent uploads' time, for the gather window (gather.go).
	upload uploadTime
	freed  chan struct{} // a token each time an upload leaves the pipeline
}

func (c *Committer) newPipe() *pipe {
	pr, ok := c.opts.Replica.(PipelinedReplica)
	if !ok || c.opts.Pipeline <= 1 || !pr.Pipelined() {
		return nil
	}
	p := &pipe{depth: c.opts.Pipeline, rep: pr,
		room: make(chan struct{}, c.opts.Pipeline),
		acks: make(chan *shipment, c.opts.Pipeline),
		fail: make(chan struct{}, 1),
		done: make(chan struct{}), freed: make(chan struct{}, 1)}
	go c.runAcknowledger(p)
	return p
}

// waitRoom blocks until fewer than depth uploads are in flight, taking the
// groups committed meanwhile into pending (they join the next upload).
func (c *Committer) waitRoom(pending []*group, open bool) ([]*group, bool) {
	p := c.pipe
	var tick <-chan time.Time // on a stalled store, answer what waits too long here
	if c.opts.Stall != nil && c.opts.Durability == Sync {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	for {
		var in chan *group
		if open {
			in = c.shipCh
		}
		select {
		case <-tick:
			c.answerPendingOverdue(pending)
		case p.room <- struct{}{}:
			if len(p.room) == p.depth {
				c.pace.start() // full: the writer gathers bigger groups meanwhile
			}
			return pending, open
		case g, ok := <-in:
			if !ok {
				open = false
				continue
			}
			pending = append(pending, g)
		}
	}
}

// answerPendingOverdue answers, while the store is stalled, each request of
// pending (groups waiting for room in the pipeline) that has waited
// Options.WriteStallTimeout: COMMITTED_NOT_DURABLE with the bookmark its
// commit will ship at, as answerOverdue does for an upload's own groups.
func (c *Committer) answerPendingOverdue(pending []*group) {
	stall := c.stalled()
	if stall == nil {
		return
	}
	now := time.Now()
	for _, g := range pending {
		kept := g.reqs[:0]
		for _, r := range g.reqs {
			if waited := now.Sub(r.queued); waited >= c.opts.WriteStallTimeout {
				if b, ok := c.bookmarkOf(g); ok {
					finish(r, b, stalledNotDurable(c.name, b, waited, stall))
					continue
				}
			}
			kept = append(kept, r)
		}
		g.reqs = kept
	}
}

// freeRoom gives back waitRoom's token once an upload is over.
func (c *Committer) freeRoom() {
	p := c.pipe
	if len(p.room) == p.depth {
		c.pace.end()
	}
	<-p.room
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// begin starts the upload of everything committed so far for groups
// (pipelined ship). An error starting it answers the groups as ship does;
// otherwise the acknowledger answers them once the upload is over.
func (c *Committer) begin(groups []*group, release func()) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.UploadTimeout)
	defer cancel()
	start, ahead := time.Now(), len(c.pipe.room)-1
	wait, err := c.pipe.rep.Begin(ctx)
	if err != nil {
		c.freeRoom()
		release()
		c.answerShipment(&shipment{groups: groups, start: start, txid: c.captured() + 1}, c.opts.Replica.Pos(), err)
		return err
	}
	txid := c.captured()
	c.pipe.acks <- &shipment{groups: groups, txid: txid, wait: wait, start: start, begun: time.Now(), ahead: ahead, release: release,
		endUpload: c.beginUpload(), stopOverdue: c.answerOverdueOwn(groups, txid)}
	return nil
}

// runAcknowledger answers the shipments in the order they were started.
func (c *Committer) runAcknowledger(p *pipe) {
	defer close(p.done)
	for s := range p.acks {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.UploadTimeout)
		pos, err := s.wait(ctx)
		cancel()
		traced := c.traceShipment(s, time.Now())
		if err == nil {
			p.upload.observe(time.Since(s.begun))
		}
		s.stopOverdue()
		s.endUpload(err)
		c.freeRoom()
		s.release()
		c.answerShipment(s, pos, err)
		traced(err)
		p.ok.Store(err == nil)
		if err != nil && !c.fenced.Load() {
			select {
			case p.fail <- struct{}{}:
			default:
			}
		}
	}
}

// answerShipment answers the requests of s after its upload ended with err
// at the shipped position pos; see ship for the answers.
func (c *Committer) answerShipment(s *shipment, pos ltx.Pos, err error) {
	if c.opts.Observer != nil {
		c.opts.Observer.Synced(c.name, time.Since(s.start), err)
	}
	var answer error
	switch {
	case err == nil:
		c.lossMu.Lock()
		owed := c.owed
		c.owed, c.failLogged = 0, ""
		c.lossMu.Unlock()
		c.noteShipped(len(s.groups) + owed) // a success ships every earlier commit too
	case errors.Is(err, engine.ErrFenced), errors.Is(err, lease.ErrLate):
		answer = c.refusedUpload(err, pos)
	default:
		// Every shipment behind a failed upload fails with its error: one line per cause.
		c.lossMu.Lock()
		first := c.failLogged != err.Error()
		c.failLogged = err.Error()
		c.lossMu.Unlock()
		if first {
			c.log.Warn("upload failed; committed data stays local and the same file is uploaded again before anything later is acknowledged",
				"db", c.name, "replica", c.opts.ReplicaName, "err", err)
		}
		b := s.txid // the commits are in that file, or an earlier one
		if b <= pos.TXID {
			b = pos.TXID + 1
		}
		answer = notDurable(c.name, b, err)
		c.lossMu.Lock()
		c.owed += len(s.groups) // still unshipped: the loss window stays visible
		c.lossMu.Unlock()
	}
	if answer == nil {
		c.observeAcked(succeeded(s.groups))
	}
	for _, g := range s.groups {
		for _, r := range g.reqs {
			var nd *NotDurableError
			if errors.As(answer, &nd) {
				finish(r, nd.TXID, nd)
			} else if answer != nil {
				finish(r, 0, answer)
			} else {
				finish(r, pos.TXID, r.err)
			}
		}
		g.reqs = nil
	}
}

// pipeIdle reports whether no pipelined upload is in flight (always true
// without a pipeline).
func (c *Committer) pipeIdle() bool { return c.pipe == nil || len(c.pipe.room) == 0 }
