package timetravel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// View is a dbhost.Database at one past TXID. Reads run on the state's
// query_only connections; a write runs there too and so fails with
// SQLite's SQLITE_READONLY, as on a read-only token. A state evicted
// between two requests is restored again on the next.
type View struct {
	c *Cache
	k key
}

func (v *View) Name() string { return v.k.name }

// Bookmark is the TXID the view shows.
func (v *View) Bookmark() dbhost.Bookmark { return dbhost.Bookmark(v.k.txid) }

func (v *View) Read(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	e, err := v.c.acquireFor(ctx, v.k, true)
	if err != nil {
		return 0, err
	}
	defer v.c.release(e)
	if !isDone(e) { // on demand while the state is restored, unless that just ended
		e.coldMu.RLock()
		if !e.coldOver {
			err := e.cold.Read(ctx, fn)
			e.coldMu.RUnlock()
			e.answerOn.Do(func() { close(e.answered) })
			return v.Bookmark(), err
		}
		e.coldMu.RUnlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return 0, sqlconn.Translate(ctx.Err())
		}
	}
	if e.err != nil { // the restore failed after the state was read on demand
		return 0, e.err
	}
	var h *sqlconn.Handle
	select {
	case h = <-e.readers:
	case <-ctx.Done():
		return 0, sqlconn.Translate(ctx.Err())
	}
	defer func() { e.readers <- h }()
	err = h.Call(fn)
	if !h.Autocommit() {
		_ = h.Run("ROLLBACK")
	}
	return v.Bookmark(), err
}

// Write runs fn read-only: its writes fail with SQLITE_READONLY.
func (v *View) Write(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	return v.Read(ctx, fn)
}

// MaxSessions bounds the interactive read transactions open on past
// states at once (each holds a connection of its own).
const MaxSessions = 64

// Session gives a read-only connection of its own on the state (a read
// batch or transaction of a libSQL client): it keeps the state from being
// evicted until closed, and every write on it fails with SQLITE_READONLY.
func (v *View) Session(ctx context.Context) (dbhost.Session, error) {
	if v.c.sessions.Add(1) > MaxSessions {
		v.c.sessions.Add(-1)
		return nil, dberr.ForDatabase(dberr.CodeUnavailable, v.k.name, fmt.Sprintf(
			"%d interactive transactions on past states are already open (the limit); commit or roll back some, or retry later", MaxSessions))
	}
	e, err := v.c.acquire(ctx, v.k)
	if err != nil {
		v.c.sessions.Add(-1)
		return nil, err
	}
	h, err := sqlconn.Open(e.path, sqlconn.OwnReader, v.c.opts.StatementTimeout)
	if err == nil {
		var fresh string
		if fresh, err = h.State(); err == nil {
			return &session{Handle: h, v: v, e: e, fresh: fresh}, nil
		}
		_ = h.Close()
	}
	v.c.release(e)
	v.c.sessions.Add(-1)
	return nil, dberr.ForDatabase(dberr.CodeInternal, v.k.name, "open a connection on a past state: "+err.Error())
}

// session is a View's interactive connection.
type session struct {
	*sqlconn.Handle
	v      *View
	e      *entry
	fresh  string
	once   sync.Once
	closed atomic.Bool
}

func (s *session) Close(ctx context.Context) (dbhost.Bookmark, error) {
	s.once.Do(func() {
		s.closed.Store(true)
		if !s.Handle.Autocommit() {
			_ = s.Handle.Run("ROLLBACK")
		}
		_ = s.Handle.Close()
		s.v.c.release(s.e)
		s.v.c.sessions.Add(-1)
	})
	return s.v.Bookmark(), nil
}

func (s *session) StateChanged() bool {
	if s.closed.Load() {
		return false
	}
	now, err := s.Handle.State()
	return err != nil || now != s.fresh
}
