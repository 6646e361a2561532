package dbhost

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// session is an interactive connection of its own (Database.Session). SQLite's
// locks order it with the write groups: while it holds a write transaction
// the writer's BEGIN IMMEDIATE waits (busy timeout), and vice versa.
type session struct {
	db       *database
	readOnly bool
	mu       sync.Mutex
	c        *conn
	closed   bool
}

// Session opens a dedicated connection; see Database.Session.
func (db *database) Session(ctx context.Context) (Session, error) {
	return db.session(ctx, false)
}

func (db *database) session(ctx context.Context, readOnly bool) (Session, error) {
	if db.fenced.Load() {
		return nil, db.fencedError()
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
	c, err := openConn(db.path, readOnly, db.opts.StatementTimeout)
	if err != nil {
		db.sessMu.Lock()
		delete(db.sessions, s)
		db.sessMu.Unlock()
		return nil, errorf("INTERNAL", http.StatusInternalServerError, err.Error())
	}
	s.mu.Lock()
	s.c = c
	s.mu.Unlock()
	return s, nil
}

func (s *session) Autocommit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || s.c.Autocommit()
}

func (s *session) Describe(ctx context.Context, sql string) (Description, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Description{}, errorf(CodeBadRequest, http.StatusBadRequest, "session is closed")
	}
	return s.c.Describe(ctx, sql)
}

// Exec runs st. When it leaves the connection in autocommit mode after a
// write (a COMMIT, or a write outside any transaction) it waits until that
// commit is durable, exactly like a write group: in sync mode the statement
// is answered only once the bucket holds it.
func (s *session) Exec(ctx context.Context, st Stmt) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Result{}, errorf(CodeBadRequest, http.StatusBadRequest, "session is closed")
	}
	wasTx := !s.c.Autocommit()
	before := s.c.totalChanges()
	res, err := s.c.Exec(ctx, st)
	if s.c.Autocommit() && (wasTx || s.c.totalChanges() != before || !IsReadStatement(st.SQL)) {
		// A no-op write group is ordered after this commit, so its upload covers it.
		if _, derr := s.db.Write(withoutIdempotency(ctx), func(Conn) error { return nil }); derr != nil && err == nil {
			return res, derr
		}
	}
	return res, err
}

// Close rolls back any open transaction, makes what was committed durable and
// returns the bookmark.
func (s *session) Close(ctx context.Context) (Bookmark, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.db.bookmark(), nil
	}
	s.closed = true
	if !s.c.Autocommit() {
		_ = execSimple(s.c.c, "ROLLBACK")
	}
	s.c.close()
	s.db.sessMu.Lock()
	delete(s.db.sessions, s)
	s.db.sessMu.Unlock()
	return s.db.bookmark(), nil
}
