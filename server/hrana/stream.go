package hrana

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicedb/sluice/server/dbhost"
)

// stream is one Hrana stream: a logical connection that lives across HTTP
// requests. Fields other than id/db are guarded by Handler.mu while the stream
// is registered and not busy; a request that holds it (busy) owns them.
type stream struct {
	id       streamID
	db       dbhost.Database
	seq      uint64 // sequence number the next baton must carry
	busy     bool
	lastUsed time.Time

	sqls map[int32]string // store_sql texts, scoped to the stream

	sess       dbhost.Session // held while the stream is inside a transaction
	txStart    time.Time
	readOnlyTx bool // opened with BEGIN ... READONLY

	closed bool   // a close request ended it
	dead   *Error // the server ended it (timeout); told to the next request
}

func (h *Handler) newStream(db dbhost.Database) (*stream, *Error) {
	s := &stream{db: db, busy: true}
	if _, err := rand.Read(s.id[:]); err != nil {
		return nil, &Error{Code: "INTERNAL_ERROR", Message: "no randomness for a stream id: " + err.Error()}
	}
	return s, nil
}

// acquire returns the stream a baton names (a new one for a nil baton) and
// marks it busy, or an HTTP status and error when the baton is unusable.
func (h *Handler) acquire(baton *string, db dbhost.Database) (*stream, int, *Error) {
	if baton == nil || *baton == "" {
		s, e := h.newStream(db)
		if e != nil {
			return nil, http.StatusInternalServerError, e
		}
		return s, 0, nil
	}
	id, seq, ok := h.signer.decode(*baton, db.Name())
	if !ok {
		return nil, http.StatusBadRequest, &Error{Code: "BATON_INVALID", Message: fmt.Sprintf(
			"the baton is not valid for database %q (forged, corrupted or issued for another database); start a new stream with a null baton", db.Name())}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streams[id]
	if s == nil || s.db.Name() != db.Name() {
		return nil, http.StatusBadRequest, &Error{Code: "STREAM_EXPIRED", Message: fmt.Sprintf(
			"the stream on database %q is closed or expired (idle for more than %s); its transaction, if any, was rolled back: start a new stream", db.Name(), h.cfg.IdleTimeout)}
	}
	if s.dead != nil {
		delete(h.streams, id)
		return nil, http.StatusBadRequest, s.dead
	}
	if s.busy || seq != s.seq {
		return nil, http.StatusBadRequest, &Error{Code: "BATON_REUSED", Message: fmt.Sprintf(
			"the baton for a stream on database %q was already used; a baton is good for one request: send the baton of the latest response", db.Name())}
	}
	s.busy = true
	return s, 0, nil
}

// release ends a request on s and returns the baton for the next one (nil if
// the stream is closed). Streams that never outlive one request are never
// registered.
func (h *Handler) release(s *stream) *string {
	h.mu.Lock()
	s.busy = false
	s.lastUsed = time.Now()
	if s.closed || s.dead != nil {
		delete(h.streams, s.id)
		h.mu.Unlock()
		return nil
	}
	if h.closed || (len(h.streams) >= maxStreams && h.streams[s.id] == nil) {
		h.mu.Unlock()
		s.closed = true
		if s.sess != nil {
			h.closeSession(s.sess, "too many open streams")
			s.sess = nil
		}
		return nil
	}
	s.seq++
	h.streams[s.id] = s
	baton := h.signer.encode(s.id, s.seq, s.db.Name())
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
	for id, s := range h.streams {
		if s.busy {
			continue // the request's context carries the transaction deadline
		}
		switch {
		case s.sess != nil && now.Sub(s.txStart) > h.cfg.TxTimeout:
			victims = append(victims, victim{s.sess, s.db.Name(), "transaction timeout"})
			s.sess = nil
			s.dead = &Error{Code: "TRANSACTION_TIMEOUT", Message: fmt.Sprintf(
				"the transaction on database %q was open for more than %s and was rolled back; keep interactive transactions short or raise the transaction timeout",
				s.db.Name(), h.cfg.TxTimeout)}
		case now.Sub(s.lastUsed) > h.cfg.IdleTimeout:
			if s.sess != nil {
				victims = append(victims, victim{s.sess, s.db.Name(), "idle timeout"})
				s.sess = nil
			}
			delete(h.streams, id)
		}
	}
	h.mu.Unlock()
	for _, v := range victims {
		h.log.Info("hrana: rolled back an abandoned transaction", "db", v.db, "reason", v.why)
		h.closeSession(v.sess, v.why)
	}
}
