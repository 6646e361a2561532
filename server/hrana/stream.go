package hrana

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// stream is one Hrana stream: a logical connection that lives across HTTP
// requests. Fields other than id/db are guarded by Handler.mu while the stream
// is registered and not busy; a request that holds it (busy) owns them.
type stream struct {
	id       streamID
	db       dbhost.Database
	owner    string // the caller's identity (WithOwner); batons carry it
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

func (h *Handler) newStream(db dbhost.Database, owner string) (*stream, *proto.Error) {
	s := &stream{db: db, owner: owner, busy: true}
	if _, err := rand.Read(s.id[:]); err != nil {
		return nil, &proto.Error{Code: dberr.CodeInternalError, Message: "no randomness for a stream id: " + err.Error()}
	}
	return s, nil
}

// acquire returns the stream a baton names (a new one for a nil baton) and
// marks it busy, or an HTTP status and error when the baton is unusable.
// A new stream that may outlive the request (oneShot false) takes a slot of
// its owner's and its database's stream quotas first: a request that could
// not keep its stream fails here, before anything runs, instead of losing
// its transaction when it is answered.
func (h *Handler) acquire(baton *string, db dbhost.Database, owner string, oneShot bool) (*stream, int, *proto.Error) {
	if baton == nil || *baton == "" {
		s, e := h.newStream(db, owner)
		if e != nil {
			return nil, http.StatusInternalServerError, e
		}
		if !oneShot {
			h.mu.Lock()
			e = h.reserve(s)
			h.mu.Unlock()
			if e != nil {
				return nil, http.StatusTooManyRequests, e
			}
		}
		return s, 0, nil
	}
	id, seq, ok := h.signer.decode(*baton, db.Name(), owner)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		if pid, pseq, _, parsed := parseBaton(*baton); parsed {
			if other := h.streams[pid]; other != nil && other.owner != owner && other.db.Name() == db.Name() {
				if _, _, genuine := h.signer.decode(*baton, db.Name(), other.owner); genuine && pseq <= other.seq {
					return nil, http.StatusForbidden, &proto.Error{Code: "BATON_FORBIDDEN", Message: fmt.Sprintf(
						"the baton belongs to a stream on database %q that another token opened; a stream can only be continued with the credentials that opened it: start a new stream with a null baton", db.Name())}
				}
			}
		}
		return nil, http.StatusBadRequest, &proto.Error{Code: "BATON_INVALID", Message: fmt.Sprintf(
			"the baton is not valid for database %q (forged, corrupted or issued for another database); start a new stream with a null baton", db.Name())}
	}
	s := h.streams[id]
	if s == nil || s.db.Name() != db.Name() || s.owner != owner {
		return nil, http.StatusBadRequest, &proto.Error{Code: "STREAM_EXPIRED", Message: fmt.Sprintf(
			"the stream on database %q is closed or expired (idle for more than %s); its transaction, if any, was rolled back: start a new stream", db.Name(), h.cfg.IdleTimeout)}
	}
	if s.dead != nil {
		h.forget(s)
		return nil, http.StatusBadRequest, s.dead
	}
	if s.busy || seq != s.seq {
		return nil, http.StatusBadRequest, &proto.Error{Code: "BATON_REUSED", Message: fmt.Sprintf(
			"the baton for a stream on database %q was already used; a baton is good for one request: send the baton of the latest response", db.Name())}
	}
	s.busy = true
	return s, 0, nil
}

// reserve takes s's slots in the quotas, or says which quota is full.
// Called with h.mu held.
func (h *Handler) reserve(s *stream) *proto.Error {
	if h.closed {
		return &proto.Error{Code: dberr.CodeUnavailable, Message: "the server is shutting down; retry on another instance"}
	}
	name := s.db.Name()
	switch {
	case s.owner != "" && h.perOwner[s.owner] >= h.cfg.MaxStreamsPerToken:
		return &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf(
			"this token already has %d open streams (the limit per token); close streams it no longer uses (or let them idle out after %s), then retry",
			h.cfg.MaxStreamsPerToken, h.cfg.IdleTimeout)}
	case h.perDB[name] >= h.cfg.MaxStreamsPerDatabase:
		return &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf(
			"database %q already has %d open streams (the limit per database); retry later", name, h.cfg.MaxStreamsPerDatabase)}
	case h.total >= h.cfg.MaxStreams:
		return &proto.Error{Code: dberr.CodeStreamLimit, Message: fmt.Sprintf(
			"the server already has %d open streams (its limit); retry later", h.cfg.MaxStreams)}
	}
	h.perOwner[s.owner]++
	h.perDB[name]++
	h.total++
	s.counted = true
	return nil
}

// forget unregisters s and returns its quota slots. Called with h.mu held.
func (h *Handler) forget(s *stream) {
	delete(h.streams, s.id)
	if !s.counted {
		return
	}
	s.counted = false
	h.total--
	if h.perOwner[s.owner]--; h.perOwner[s.owner] <= 0 {
		delete(h.perOwner, s.owner)
	}
	if name := s.db.Name(); h.perDB[name] > 1 {
		h.perDB[name]--
	} else {
		delete(h.perDB, name)
	}
}

// release ends a request on s and returns the baton for the next one (nil if
// the stream is closed). Streams that never outlive one request are never
// registered.
func (h *Handler) release(s *stream) *string {
	h.mu.Lock()
	s.busy = false
	s.lastUsed = time.Now()
	if s.closed || s.dead != nil || h.closed {
		h.forget(s)
		h.mu.Unlock()
		s.closed = true
		if s.sess != nil {
			h.closeSession(s.sess, "stream closed")
			s.sess = nil
		}
		return nil
	}
	if !s.counted {
		// A one-shot stream its request left open (it did not end with a
		// close): keep it, over quota if need be, rather than drop its work.
		h.perOwner[s.owner]++
		h.perDB[s.db.Name()]++
		h.total++
		s.counted = true
	}
	s.seq++
	h.streams[s.id] = s
	baton := h.signer.encode(s.id, s.seq, s.db.Name(), s.owner)
	h.mu.Unlock()
	return &baton
}

// closeSession rolls back whatever the session still holds.
func (h *Handler) closeSession(sess dbhost.Session, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := sess.Close(ctx); err != nil {
		h.log.Warn("hrana: closing a stream's session failed", "reason", why, "err", err)
	}
}

// reap closes idle streams and rolls back transactions past TxTimeout.
func (h *Handler) reap() {
	defer close(h.reaperOut)
	every := min(h.cfg.IdleTimeout, h.cfg.TxTimeout) / 10
	every = max(every, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.reapOnce(now)
		}
	}
}

func (h *Handler) reapOnce(now time.Time) {
	type victim struct {
		sess dbhost.Session
		db   string
		why  string
	}
	var victims []victim
	h.mu.Lock()
	for _, s := range h.streams {
		if s.busy {
			continue // the request's context carries the transaction deadline
		}
		switch {
		case s.sess != nil && !s.txStart.IsZero() && now.Sub(s.txStart) > h.cfg.TxTimeout:
			victims = append(victims, victim{s.sess, s.db.Name(), "transaction timeout"})
			s.sess = nil
			s.dead = &proto.Error{Code: dberr.CodeTransactionTimeout, Message: fmt.Sprintf(
				"the transaction on database %q was open for more than %s and was rolled back; keep interactive transactions short or raise the transaction timeout",
				s.db.Name(), h.cfg.TxTimeout)}
		case now.Sub(s.lastUsed) > h.cfg.IdleTimeout:
			if s.sess != nil {
				victims = append(victims, victim{s.sess, s.db.Name(), "idle timeout"})
				s.sess = nil
			}
			h.forget(s)
		}
	}
	h.mu.Unlock()
	for _, v := range victims {
		h.log.Info("hrana: rolled back an abandoned transaction", "db", v.db, "reason", v.why)
		h.closeSession(v.sess, v.why)
	}
}
