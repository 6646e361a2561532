package dbhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// session is an interactive connection of its own (Database.Session). SQLite's
// locks order it with the write groups: while it holds a write transaction
// the writer's BEGIN IMMEDIATE waits (busy timeout), and vice versa.
type session struct {
	db       *database
	readOnly bool
	mu       sync.Mutex
	c        *sqlconn.Handle
	fresh    string // the connection's state when it opened (state.go)
	closed   bool
	// Between requests (turn.go): the session's place in the database's
	// write order, and why the server ended it, told to its next statement.
	hasTurn  bool
	running  atomic.Bool  // a statement is running
	lastUsed atomic.Int64 // unix nanoseconds when its last statement ended
	ended    *dberr.Error
}

// Session opens a dedicated connection; see Database.Session.
func (db *database) Session(ctx context.Context) (Session, error) {
	return db.session(ctx, false)
}

func (db *database) session(ctx context.Context, readOnly bool) (Session, error) {
	if db.commits.Fenced() {
		return nil, groupcommit.FencedError(db.name)
	}
	db.gate.RLock()
	if db.closed {
		evicted := db.evicted
		db.gate.RUnlock()
		if evicted {
			d, err := db.reopen(ctx)
			if err != nil {
				return nil, err
			}
			if dd, ok := d.(*database); ok {
				return dd.session(ctx, readOnly)
			}
			return d.Session(ctx)
		}
		return nil, db.unavailable("closing; retry")
	}
	defer db.gate.RUnlock()
	db.touch()
	// Read-only and read-write sessions have budgets of their own, so that
	// readers holding sessions never lock writers out of transactions.
	limit, kind := db.opts.MaxSessions, "read-write"
	if readOnly {
		limit, kind = db.opts.MaxReadSessions, "read-only"
	}
	s := &session{db: db, readOnly: readOnly}
	s.lastUsed.Store(time.Now().UnixNano())
	db.sessMu.Lock()
	n := 0
	for o := range db.sessions {
		if o.readOnly == readOnly {
			n++
		}
	}
	if n >= limit {
		db.sessMu.Unlock()
		return nil, db.unavailable(fmt.Sprintf("%d %s interactive transactions are already open (the limit per database); commit or roll back some, or retry later", limit, kind))
	}
	db.sessions[s] = struct{}{} // reserved before opening, so concurrent opens respect the limit
	db.sessMu.Unlock()
	role := sqlconn.OwnWriter
	if readOnly {
		role = sqlconn.OwnReader
	}
	c, err := sqlconn.Open(db.path, role, db.opts.StatementTimeout)
	if err != nil {
		db.sessMu.Lock()
		delete(db.sessions, s)
		db.sessMu.Unlock()
		return nil, dberr.New(dberr.CodeInternal, err.Error())
	}
	fresh, err := c.State()
	if err != nil {
		c.Close()
		db.sessMu.Lock()
		delete(db.sessions, s)
		db.sessMu.Unlock()
		return nil, dberr.New(dberr.CodeInternal, "read a new connection's settings: "+err.Error())
	}
	s.mu.Lock()
	s.c, s.fresh = c, fresh
	s.mu.Unlock()
	return s, nil
}

// StateChanged reports whether the connection differs from a fresh one: a
// connection-state pragma holds another value, or TEMP objects exist.
func (s *session) StateChanged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	now, err := s.c.State()
	return err != nil || now != s.fresh
}

func (s *session) Autocommit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || s.c.Autocommit()
}

func (s *session) Describe(ctx context.Context, sql string) (sqlconn.Description, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sqlconn.Description{}, s.closedError()
	}
	return s.c.Describe(ctx, sql)
}

// Exec runs st. When it leaves the connection in autocommit mode after a
// write (a COMMIT, or a write outside any transaction) it waits until that
// commit is durable, exactly like a write group: in sync mode the statement
// is answered only once the bucket holds it.
func (s *session) Exec(ctx context.Context, st sqlconn.Stmt) (sqlconn.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sqlconn.Result{}, s.closedError()
	}
	s.running.Store(true)
	defer func() {
		s.lastUsed.Store(time.Now().UnixNano())
		s.running.Store(false)
	}()
	if err := s.takeTurn(ctx, st.SQL); err != nil {
		return sqlconn.Result{}, err
	}
	wasTx := !s.c.Autocommit()
	before := s.c.TotalChanges()
	res, err := s.c.Exec(ctx, st)
	if s.hasTurn && s.c.Autocommit() {
		s.releaseTurn() // before the no-op write group below, which takes the turn
	}
	if errors.Is(err, dberr.ErrInternal) {
		// The statement failed inside the SQLite layer: trust nothing the
		// connection holds. Roll back, close it, and end the session.
		s.abandon()
		return sqlconn.Result{}, err
	}
	if s.c.Autocommit() && (wasTx || s.c.Wrote() || s.c.TotalChanges() != before) {
		// A no-op write group is ordered after this commit, so its upload covers it.
		if _, derr := s.db.Write(groupcommit.WithoutIdempotency(ctx), func(sqlconn.Conn) error { return nil }); derr != nil && err == nil {
			return res, derr
		}
	}
	return res, err
}

// abandon rolls back and closes the connection; the session is closed.
// Called with s.mu held.
func (s *session) abandon() {
	s.closed = true
	if !s.c.Autocommit() {
		_ = s.c.Run("ROLLBACK")
	}
	if s.hasTurn {
		s.releaseTurn()
	}
	s.c.Close()
	s.db.sessMu.Lock()
	delete(s.db.sessions, s)
	s.db.sessMu.Unlock()
}

// Close rolls back any open transaction, makes what was committed durable and
// returns the bookmark.
func (s *session) Close(ctx context.Context) (Bookmark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.db.bookmark(), nil
	}
	s.abandon()
	return s.db.bookmark(), nil
}
