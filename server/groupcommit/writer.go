package groupcommit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
	"github.com/superfly/ltx"
)

// The write path. One writer goroutine per database drains the queue of
// waiting requests into one group: BEGIN IMMEDIATE, each request inside its
// own SAVEPOINT (an error rolls back only that request), COMMIT. The group
// then goes to the shipper, and the writer starts the next group while the
// previous one uploads (pipelining); each group is answered only after the
// upload that covers it (sync) or right after COMMIT (async). In sync mode
// a small group waits while an upload runs (see gather): one commit per
// upload instead of one per handful of requests.

// savepointName is unguessable so that a request cannot RELEASE or ROLLBACK
// TO the group's own savepoint.
var savepointName = func() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "sluice_req_" + hex.EncodeToString(b)
}()

func (c *Committer) runWriter() {
	defer close(c.shipCh)
	for req := range c.writeCh {
		reqs := c.gather(req)
		c.groupsBegun.Add(1)
		c.runGroup(reqs)
		c.groupsEnded.Add(1)
	}
}

// minGroupWhileUploading: in sync mode, while an upload is in flight, a
// group of fewer requests waits for more or for the upload to end. Its
// commit could not ship earlier anyway, and one commit per upload costs far
// less than one per handful of requests (each commit is a BEGIN, a COMMIT
// and WAL frames that the next capture reads back).
const minGroupWhileUploading = 64

// gather collects the requests queued behind first into one group.
func (c *Committer) gather(first *writeReq) []*writeReq {
	max := c.opts.MaxGroupRequests
	reqs := []*writeReq{first}
	pace := c.opts.Durability == Sync
	if pace {
		var open bool
		if reqs, open = c.gatherWhileInFlight(reqs, max); !open {
			return reqs
		}
	}
	for len(reqs) < max {
		select {
		case r, ok := <-c.writeCh:
			if !ok {
				return reqs
			}
			reqs = append(reqs, r)
			continue
		default:
		}
		if !pace || len(reqs) >= minGroupWhileUploading || !c.pace.uploading.Load() {
			return reqs
		}
		wake, stop := c.stallWake()
		select {
		case r, ok := <-c.writeCh:
			stop()
			if !ok {
				return reqs
			}
			reqs = append(reqs, r)
		case <-c.pace.idle():
			stop()
			return reqs
		case <-wake: // the upload stalled: runGroup refuses what it gathered
			return reqs
		}
	}
	return reqs
}

// uploadPace tells the writer whether an upload is in flight and when it ends.
type uploadPace struct {
	uploading atomic.Bool
	began     atomic.Int64 // the upload's start (Unix ns); 0: none
	once      sync.Once
	ended     chan struct{} // one token after each upload
}

func (p *uploadPace) idle() chan struct{} {
	p.once.Do(func() { p.ended = make(chan struct{}, 1) })
	return p.ended
}

func (p *uploadPace) start() {
	select { // a token from an earlier upload would end the next wait early
	case <-p.idle():
	default:
	}
	p.began.Store(time.Now().UnixNano())
	p.uploading.Store(true)
}

func (p *uploadPace) end() {
	p.uploading.Store(false)
	p.began.Store(0)
	select {
	case p.idle() <- struct{}{}:
	default:
	}
}

func finish(r *writeReq, txid ltx.TXID, err error) {
	r.txid, r.err = txid, err
	close(r.done)
}

// runGroup executes reqs as one transaction and hands the committed group to
// the shipper. Requests whose caller has gone are skipped.
func (c *Committer) runGroup(reqs []*writeReq) {
	if c.fenced.Load() {
		for _, r := range reqs {
			finish(r, 0, FencedError(c.name))
		}
		return
	}
	if err := c.stalled(); err != nil {
		// Nothing runs: a commit now could not ship until the store
		// answers, and its client would wait for that.
		for _, r := range reqs {
			finish(r, 0, stalledError(c.name, err))
		}
		return
	}
	live := reqs[:0:0]
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			finish(r, 0, sqlconn.Translate(err))
			continue
		}
		live = append(live, r)
	}
	start := time.Now()
	// The first attempt runs without savepoints: in modernc's SQLite each
	// savepoint that writes allocates a 64 KiB statement journal chunk (an
	// mmap/munmap pair), which costs more than the insert itself. If a request
	// fails, the whole transaction is rolled back, that request is answered,
	// and the rest run again with a savepoint each (so failures cost at most
	// one re-run of the group).
	safe := false
	for len(live) > 0 {
		restart, ok := c.tryGroup(live, safe)
		if ok {
			break
		}
		if restart == nil { // the whole group failed and was answered
			return
		}
		live, safe = restart, true
	}
	if len(live) == 0 {
		return
	}
	if c.opts.Observer != nil {
		c.opts.Observer.GroupCommitted(c.name, len(live), time.Since(start))
	}
	g := &group{committed: time.Now()}
	c.noteCommitted(g.committed)
	b := c.position()
	if c.opts.Durability == Async {
		acked := 0 // counted before anyone is answered, as the shipper does
		for _, r := range live {
			if r.err == nil {
				acked++
			}
		}
		c.observeAcked(acked)
	}
	for _, r := range live {
		// A request that failed was rolled back: nothing of it to wait for.
		if r.err != nil || c.opts.Durability == Async {
			finish(r, b, r.err)
		} else {
			g.reqs = append(g.reqs, r)
		}
	}
	c.shipCh <- g
}

// tryGroup runs one attempt. ok: committed (each request's own error is in
// r.err). Otherwise restart lists the requests to run again in a fresh
// transaction: the request that failed is answered with its error and the
// others are re-run. That happens when a request fails without savepoints
// (safe=false), or when SQLite itself rolled the whole transaction back (an
// interrupted statement does that).
func (c *Committer) tryGroup(live []*writeReq, safe bool) (restart []*writeReq, ok bool) {
	w := c.opts.Writer
	if t := c.opts.Turn; t != nil {
		_ = t.Acquire(context.Background(), nil) // no deadline: a holder runs a statement or is revoked
		defer t.Release()
	}
	if err := c.txControl("BEGIN IMMEDIATE"); err != nil {
		for _, r := range live {
			finish(r, 0, c.unavailable("cannot start a write transaction: "+err.Error()+"; retry"))
		}
		return nil, false
	}
	for i, r := range live {
		r.err = nil
		if safe {
			if err := w.Run("SAVEPOINT " + savepointName); err != nil {
				c.abortGroup(live, "savepoint failed", err)
				return nil, false
			}
		}
		if !safe {
			w.TookSavepoint() // count this request's statements only
		}
		r.err = c.runReq(w, r)
		if !safe && w.TookSavepoint() {
			// A savepoint a request leaves open, or a ROLLBACK TO one that
			// an earlier request left, would reach into the requests before
			// it in the group: writes already promised to their clients. Run
			// the group again with a savepoint per request, whose RELEASE
			// closes whatever the request left open.
			if !w.Autocommit() {
				if err := c.txControl("ROLLBACK"); err != nil {
					c.abortGroup(live, "rollback failed", err)
					return nil, false
				}
			}
			return live, false
		}
		if w.Autocommit() || (r.err != nil && !safe) { // answer r, re-run the rest
			if r.err == nil {
				r.err = dberr.New(dberr.CodeSQLiteError, "the request ended the group's transaction")
			}
			if !w.Autocommit() {
				if err := c.txControl("ROLLBACK"); err != nil {
					c.abortGroup(live, "rollback failed", err)
					return nil, false
				}
			}
			finish(r, 0, r.err)
			rest := append(append([]*writeReq{}, live[:i]...), live[i+1:]...)
			return rest, false
		}
		if r.err != nil {
			if e1, e2 := w.Run("ROLLBACK TO "+savepointName), w.Run("RELEASE "+savepointName); e1 != nil || e2 != nil {
				c.abortGroup(live, "rollback to savepoint failed", nil)
				return nil, false
			}
			continue
		}
		if !safe {
			continue
		}
		if err := w.Run("RELEASE " + savepointName); err != nil {
			c.abortGroup(live, "release savepoint failed", err)
			return nil, false
		}
	}
	if err := c.txControl("COMMIT"); err != nil {
		c.abortGroup(live, "commit failed", err)
		return nil, false
	}
	return nil, true
}

// callReq runs a request's statements. Statements that leave a deferred
// foreign-key violation pending (a row that REFERENCES a parent under
// DEFERRABLE INITIALLY DEFERRED, as Django declares every foreign key)
// succeed one by one, and only the COMMIT would refuse them: the COMMIT of
// the whole group, failing every request in it. The request is the unit
// that commits on its own, so it is judged at its end: with violations
// pending it fails as its COMMIT would on a local file, and is rolled back
// alone like any failing request.
func callReq(w *sqlconn.Handle, fn func(sqlconn.Conn) error) error {
	if err := w.Call(fn); err != nil {
		return err
	}
	if !w.Autocommit() && w.ForeignKeysPending() {
		return dberr.New(codeForeignKey, "FOREIGN KEY constraint failed")
	}
	return nil
}

// codeForeignKey is SQLite's code for a COMMIT refused by a deferred
// foreign key (what a client sees on a local file).
const codeForeignKey = "SQLITE_CONSTRAINT_FOREIGNKEY"

// txControl runs BEGIN/COMMIT/ROLLBACK for the group; requests themselves
// may not (the guard refuses transaction control on the writer).
func (c *Committer) txControl(sql string) error {
	return c.opts.Writer.RunTxControl(sql)
}

// abortGroup rolls the group back and answers every request in it with the
// cause. Only a cause that may pass invites a retry: a busy or failing disk,
// memory, an internal error. A full disk answers with SQLite's own code
// (what a client sees on a local file): not the server's bug but its
// operator's to fix, and the retry works once there is room. Any other
// SQLite error (a constraint, a read-only or corrupt file) would fail the
// retry the same way, so it is answered with its code and no retry.
func (c *Committer) abortGroup(live []*writeReq, why string, cause error) {
	if !c.opts.Writer.Autocommit() {
		_ = c.txControl("ROLLBACK")
	}
	code, retry := dberr.CodeInternal, true
	if cause != nil {
		e := dberr.As(sqlconn.Translate(cause))
		if e != nil {
			why += ": " + e.Code + ": " + e.Message
		} else {
			why += ": " + cause.Error()
		}
		if e != nil && strings.HasPrefix(e.Code, dberr.CodeSQLitePrefix) {
			switch {
			case strings.HasPrefix(e.Code, codeDiskFull):
				code = e.Code
				why += " (the server's disk is full)"
			case !transientCode(e.Code):
				code, retry = e.Code, false
			}
		}
	}
	c.log.Error("write group failed; nothing of it was committed", "db", c.name, "requests", len(live), "reason", why)
	msg := "database " + quote(c.name) + ": " + why + "; nothing was committed"
	if retry {
		msg += ", retry"
	}
	for _, r := range live {
		finish(r, 0, dberr.ForDatabase(code, c.name, msg))
	}
}

// codeDiskFull is SQLite's code for a write that found no room on the disk.
const codeDiskFull = "SQLITE_FULL"

// transientCode reports whether SQLite's code names a condition that may
// pass (the same write may succeed when retried).
func transientCode(code string) bool {
	for _, p := range []string{"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_NOMEM", "SQLITE_INTERRUPT", "SQLITE_PROTOCOL", "SQLITE_INTERNAL", "SQLITE_CANTOPEN"} {
		if code == p || strings.HasPrefix(code, p+"_") {
			return true
		}
	}
	return false
}
