package dbhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// An interactive session that writes takes the database's write turn
// (groupcommit.Turn) before the statement that may take SQLite's write lock,
// and keeps it until its transaction ends: writers are then served in
// order, and one that holds the lock idle while others wait is rolled back
// after Options.IdleWriteTimeout instead of after the whole transaction
// timeout. Statements SQLite calls read-only (outside BEGIN IMMEDIATE and
// EXCLUSIVE) never wait for the turn.

// takeTurn waits for the turn if sql may take the write lock and the session
// does not hold the turn yet. Called with s.mu held.
func (s *session) takeTurn(ctx context.Context, sql string) error {
	if s.readOnly || s.hasTurn || s.db.turn == nil || !s.mayWrite(ctx, sql) {
		return nil
	}
	if err := s.db.turn.Acquire(ctx, s); err != nil {
		return sqlconn.Translate(err)
	}
	s.hasTurn = true
	return nil
}

// mayWrite reports whether sql may take SQLite's write lock: a statement
// SQLite does not call read-only, or BEGIN IMMEDIATE/EXCLUSIVE (which SQLite
// does). SQL that does not prepare is run without the turn: it fails.
func (s *session) mayWrite(ctx context.Context, sql string) bool {
	for _, st := range sqltext.Split(sql) {
		if w := sqltext.LeadingWords(st, 2); len(w) == 2 && w[0] == "BEGIN" && (w[1] == "IMMEDIATE" || w[1] == "EXCLUSIVE") {
			return true
		}
	}
	d, err := s.c.Describe(ctx, sql)
	return err == nil && !d.ReadOnly // what does not prepare fails before it writes
}

// releaseTurn hands the turn on. Called with s.mu held (or from abandon).
func (s *session) releaseTurn() {
	s.hasTurn = false
	s.db.turn.Release()
}

// IdleFor is how long the session has run no statement (groupcommit.Holder).
func (s *session) IdleFor() time.Duration {
	if s.running.Load() {
		return 0
	}
	return time.Since(time.Unix(0, s.lastUsed.Load()))
}

// Revoke rolls back and ends the session because it held the write turn idle
// while others waited (groupcommit.Holder). A session running a statement
// is left alone.
func (s *session) Revoke() bool {
	if !s.mu.TryLock() {
		return false
	}
	defer s.mu.Unlock()
	if s.closed || s.running.Load() {
		return s.closed
	}
	s.ended = dberr.ForDatabase(dberr.CodeTransactionTimeout, s.db.name, fmt.Sprintf(
		"database %s: the transaction was rolled back: it held the database's write lock idle for more than %s while other writers waited (limits.idle-write-timeout); send a transaction's statements without pauses, or as one batch",
		quote(s.db.name), s.db.opts.IdleWriteTimeout))
	s.db.log.Info("rolled back an idle write transaction other writers waited for", "idle", s.IdleFor().Round(time.Millisecond))
	s.abandon()
	return true
}

// closedError is what a closed session's next statement gets.
func (s *session) closedError() error {
	if s.ended != nil {
		return endedError{s.ended}
	}
	return dberr.New(dberr.CodeBadRequest, "session is closed")
}

// ErrSessionEnded matches the error of a statement on a session the server
// ended (an idle write transaction others waited for, a database closed to
// make room): whatever the client's transaction or connection held is gone,
// so its stream must not go on as if it were not.
var ErrSessionEnded = errors.New("session ended by the server")

type endedError struct{ e *dberr.Error }

func (e endedError) Error() string        { return e.e.Error() }
func (e endedError) Unwrap() error        { return e.e }
func (e endedError) Is(target error) bool { return target == ErrSessionEnded }

// MaxOpen is the cap on open databases, defaults applied.
func (h *Host) MaxOpen() int { return h.opts.MaxOpen }
