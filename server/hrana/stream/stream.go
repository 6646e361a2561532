package stream

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// Stream is one Hrana stream: a logical connection that lives across HTTP
// requests. Fields other than id/db are guarded by Registry.mu while the stream
// is registered and not busy; a request that holds it (busy) owns them.
type Stream struct {
	id       streamID
	db       dbhost.Database
	owner    string // the caller's identity (hrana.WithOwner); batons carry it
	counted  bool   // holds a slot of its owner's and its database's quotas
	seq      uint64 // sequence number the next baton must carry
	busy     bool
	lastUsed time.Time

	sqls map[int32]string // store_sql texts, scoped to the stream

	sess       dbhost.Session // held while the stream is inside a transaction or changed its connection
	txStart    time.Time      // when the session's transaction began; zero in autocommit
	readOnlyTx bool           // opened with BEGIN ... READONLY

	closed bool         // a close request ended it
	dead   *proto.Error // the server ended it (timeout); told to the next request
}

func (r *Registry) newStream(db dbhost.Database, owner string) (*Stream, *proto.Error) {
	s := &Stream{db: db, owner: owner, busy: true}
	if _, err := rand.Read(s.id[:]); err != nil {
		return nil, &proto.Error{Code: dberr.CodeInternalError, Message: "no randomness for a stream id: " + err.Error()}
	}
	return s, nil
}

// Acquire returns the stream a baton names (a new one for a nil baton) and
// marks it busy, or why and how it refused the baton.
// A new stream that may outlive the request (oneShot false) takes a slot of
// its owner's and its database's stream quotas first: a request that could
// not keep its stream fails here, before anything runs, instead of losing
// its transaction when it is answered.
func (r *Registry) Acquire(baton *string, db dbhost.Database, owner string, oneShot bool) (*Stream, Refusal, *proto.Error) {
	if baton == nil || *baton == "" {
		s, e := r.newStream(db, owner)
		if e != nil {
			return nil, RefusedInternal, e
		}
		if !oneShot {
			r.mu.Lock()
			e = r.reserve(s)
			r.mu.Unlock()
			if e != nil {
				return nil, RefusedQuota, e
			}
		}
		return s, 0, nil
	}
	id, seq, ok := r.signer.decode(*baton, db.Name(), owner)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok {
		if pid, pseq, _, parsed := parseBaton(*baton); parsed {
			if other := r.streams[pid]; other != nil && other.owner != owner && other.db.Name() == db.Name() {
				if _, _, genuine := r.signer.decode(*baton, db.Name(), other.owner); genuine && pseq <= other.seq {
					return nil, RefusedForbidden, &proto.Error{Code: "BATON_FORBIDDEN", Message: fmt.Sprintf(
						"the baton belongs to a stream on database %q that another token opened; a stream can only be continued with the credentials that opened it: start a new stream with a null baton", db.Name())}
				}
			}
		}
		return nil, RefusedBaton, &proto.Error{Code: "BATON_INVALID", Message: fmt.Sprintf(
			"the baton is not valid for database %q (forged, corrupted or issued for another database); start a new stream with a null baton", db.Name())}
	}
	s := r.streams[id]
	if s == nil {
		resumed, e := r.resume(id, seq, db, owner)
		if e != nil {
			return nil, RefusedQuota, e
		}
		if resumed != nil {
			return resumed, 0, nil
		}
	}
	if s == nil || s.db.Name() != db.Name() || s.owner != owner {
		return nil, RefusedBaton, &proto.Error{Code: "STREAM_EXPIRED", Message: fmt.Sprintf(
			"the stream on database %q is closed or expired (idle for more than %s); its transaction, if any, was rolled back: start a new stream", db.Name(), r.cfg.IdleTimeout)}
	}
	if s.dead != nil {
		r.forget(s)
		return nil, RefusedBaton, s.dead
	}
	if s.busy || seq != s.seq {
		return nil, RefusedBaton, &proto.Error{Code: "BATON_REUSED", Message: fmt.Sprintf(
			"the baton for a stream on database %q was already used; a baton is good for one request: send the baton of the latest response", db.Name())}
	}
	s.busy = true
	return s, 0, nil
}

// reserve takes s's slots in the quotas, or says which quota is full.
// Called with h.mu held.
func (r *Registry) reserve(s *Stream) *proto.Error {
	if r.closed {
		return &proto.Error{Code: dberr.CodeUnavailable, Message: "the server is shutting down; retry on another instance"}
	}
	name := s.db.Name()
	switch {
	case s.owner != "" && r.perOwner[s.owner] >= r.cfg.MaxStreamsPerToken:
		return &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf(
			"this token already has %d open streams (the limit per token); close streams it no longer uses (or let them idle out after %s), then retry",
			r.cfg.MaxStreamsPerToken, r.cfg.IdleTimeout)}
	case r.perDB[name] >= r.cfg.MaxStreamsPerDatabase:
		return &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf(
			"database %q already has %d open streams (the limit per database); retry later", name, r.cfg.MaxStreamsPerDatabase)}
	case r.total >= r.cfg.MaxStreams:
		return &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf(
			"the server already has %d open streams (its limit); retry later", r.cfg.MaxStreams)}
	}
	r.perOwner[s.owner]++
	r.perDB[name]++
	r.total++
	s.counted = true
	return nil
}

// forget unregisters s and returns its quota slots. Called with h.mu held.
func (r *Registry) forget(s *Stream) {
	delete(r.streams, s.id)
	if !s.counted {
		return
	}
	s.counted = false
	r.total--
	if r.perOwner[s.owner]--; r.perOwner[s.owner] <= 0 {
		delete(r.perOwner, s.owner)
	}
	if name := s.db.Name(); r.perDB[name] > 1 {
		r.perDB[name]--
	} else {
		delete(r.perDB, name)
	}
}

// Release ends a request on s and returns the baton for the next one (nil if
// the stream is closed). Streams that never outlive one request are never
// registered.
func (r *Registry) Release(s *Stream) *string {
	r.mu.Lock()
	s.busy = false
	s.lastUsed = time.Now()
	if s.closed || s.dead != nil || r.closed {
		r.forget(s)
		r.mu.Unlock()
		s.closed = true
		if s.sess != nil {
			r.closeSession(s.sess, "stream closed")
			s.sess = nil
		}
		return nil
	}
	if !s.counted {
		// A one-shot stream its request left open (it did not end with a
		// close): keep it, over quota if need be, rather than drop its work.
		r.perOwner[s.owner]++
		r.perDB[s.db.Name()]++
		r.total++
		s.counted = true
	}
	s.seq++
	r.streams[s.id] = s
	baton := r.signer.encode(s.id, s.seq, s.db.Name(), s.owner)
	r.mu.Unlock()
	return &baton
}

// closeSession rolls back whatever the session still holds.
func (r *Registry) closeSession(sess dbhost.Session, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sess.Close(ctx); err != nil {
		r.log.Warn("hrana: closing a stream's session failed", "reason", why, "err", err)
	}
}

// reap closes idle streams and rolls back transactions past TxTimeout.
func (r *Registry) reap() {
	defer close(r.reaperOut)
	every := min(r.cfg.IdleTimeout, r.cfg.TxTimeout) / 10
	every = max(every, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.reapOnce(now)
		}
	}
}

func (r *Registry) reapOnce(now time.Time) {
	type victim struct {
		sess dbhost.Session
		db   string
		why  string
	}
	var victims []victim
	r.mu.Lock()
	for _, s := range r.streams {
		if s.busy {
			continue // the request's context carries the transaction deadline
		}
		switch {
		case s.sess != nil && !s.txStart.IsZero() && now.Sub(s.txStart) > r.cfg.TxTimeout:
			victims = append(victims, victim{s.sess, s.db.Name(), "transaction timeout"})
			s.sess = nil
			s.dead = &proto.Error{Code: dberr.CodeTransactionTimeout, Message: fmt.Sprintf(
				"the transaction on database %q was open for more than %s and was rolled back; keep interactive transactions short or raise the transaction timeout",
				s.db.Name(), r.cfg.TxTimeout)}
		case now.Sub(s.lastUsed) > r.cfg.IdleTimeout:
			r.rememberClean(s, now)
			if s.sess != nil {
				victims = append(victims, victim{s.sess, s.db.Name(), "idle timeout"})
				s.sess = nil
			}
			r.forget(s)
		}
	}
	r.trimResumables(now)
	r.mu.Unlock()
	for _, v := range victims {
		r.log.Info("hrana: rolled back an abandoned transaction", "db", v.db, "reason", v.why)
		r.closeSession(v.sess, v.why)
	}
}
