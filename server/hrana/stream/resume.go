package stream

import (
	"time"

	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/hrana/proto"
)

// A stream that idles out holding nothing — no transaction, no changed
// connection state, no stored SQL — loses nothing by expiring: its next
// request would run exactly as it would have. Clients that keep one Hrana
// stream per connection over HTTP (PyPI libsql, the libsql crate's remote
// connections) cannot recover from STREAM_EXPIRED, so an application that
// queries less often than every IdleTimeout would fail for good. The
// registry therefore remembers such a stream's last baton and continues
// the stream when that baton comes back. A stream that held anything is
// never continued: its next request learns that its state is gone.

const (
	// resumeFor is how long an idled-out clean stream can be continued.
	resumeFor = 24 * time.Hour
	// maxResumable bounds the streams remembered (about 100 bytes each);
	// past it the oldest are forgotten and answered STREAM_EXPIRED.
	maxResumable = 1 << 16
)

// resumable is what the registry remembers of an idled-out clean stream
// (at most maxResumable in all, and as many per owner as its open streams):
// the one baton that continues it.
type resumable struct {
	seq       uint64
	db, owner string
	at        time.Time
}

// resumeEntry is one place in Registry.resumeQueue, which orders the
// remembered streams oldest first (an id may appear again later: only its
// newest entry, matching the remembered at, counts).
type resumeEntry struct {
	id streamID
	at time.Time
}

// rememberClean keeps an idled-out stream continuable if it holds nothing.
// Called with r.mu held, before the stream is forgotten.
func (r *Registry) rememberClean(s *Stream, now time.Time) {
	if s.sess != nil || len(s.sqls) > 0 || s.dead != nil || s.closed {
		return // it held something, or its end is still to be told
	}
	if r.resumableOwners[s.owner] >= r.cfg.MaxStreamsPerToken {
		return // one token cannot crowd out the others' streams
	}
	r.resumables[s.id] = resumable{seq: s.seq, db: s.db.Name(), owner: s.owner, at: now}
	r.resumableOwners[s.owner]++
	r.resumeQueue = append(r.resumeQueue, resumeEntry{s.id, now})
	r.trimResumables(now)
}

// forgetResumable drops a remembered stream. Called with r.mu held.
func (r *Registry) forgetResumable(id streamID) {
	c, ok := r.resumables[id]
	if !ok {
		return
	}
	delete(r.resumables, id)
	if r.resumableOwners[c.owner]--; r.resumableOwners[c.owner] <= 0 {
		delete(r.resumableOwners, c.owner)
	}
}

// trimResumables forgets the streams remembered past resumeFor or beyond
// maxResumable, oldest first. Called with r.mu held.
func (r *Registry) trimResumables(now time.Time) {
	for len(r.resumeQueue) > 0 {
		e := r.resumeQueue[0]
		cur, ok := r.resumables[e.id]
		stale := !ok || !cur.at.Equal(e.at)
		if !stale && len(r.resumables) <= maxResumable && now.Sub(e.at) <= resumeFor {
			break
		}
		if !stale {
			r.forgetResumable(e.id)
		}
		r.resumeQueue = r.resumeQueue[1:]
	}
	// Streams continued leave their entries behind a younger one: keep the
	// queue within twice what it orders.
	if len(r.resumeQueue) > 2*len(r.resumables)+1024 {
		live := make([]resumeEntry, 0, 2*len(r.resumables))
		for _, e := range r.resumeQueue {
			if cur, ok := r.resumables[e.id]; ok && cur.at.Equal(e.at) {
				live = append(live, e)
			}
		}
		r.resumeQueue = live
	}
}

// resume continues a remembered stream named by a genuine baton: the same
// id, owner and database, and the baton its last response gave. It returns
// nil when there is none, or the quota error that keeps it remembered for
// a retry. Called with r.mu held.
func (r *Registry) resume(id streamID, seq uint64, db dbhost.Database, owner string) (*Stream, *proto.Error) {
	c, ok := r.resumables[id]
	if !ok || c.seq != seq || c.db != db.Name() || c.owner != owner {
		return nil, nil
	}
	s := &Stream{id: id, db: db, owner: owner, seq: seq, busy: true}
	if e := r.reserve(s); e != nil {
		return nil, e
	}
	r.forgetResumable(id)
	r.streams[id] = s // busy: the same baton sent twice at once is refused as reused
	return s, nil
}
