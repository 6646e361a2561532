package followers

import (
	"context"
	"errors"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// View is a read-only dbhost.Database served from this instance's copy.
// Its Write and Session fail with a *NeedsWriterError: the server decides
// before a request runs whether it reads only (StatementsReadOnly), and a
// request that needs the writer after all is sent there.
type View struct {
	fd *followed
}

// NeedsWriterError is what a View answers a write or a session: the
// request belongs to the database's writer. It unwraps to the error a
// client would see if it were answered as it is.
type NeedsWriterError struct{ Name string }

func (e *NeedsWriterError) Error() string { return e.Unwrap().Error() }

func (e *NeedsWriterError) Unwrap() error {
	return dberr.ForDatabase(dberr.CodeNotLeader, e.Name, "database "+quote(e.Name)+": this instance is a read replica; writes go to the lease holder; retry")
}

// IsNeedsWriter reports whether err says that the request needs the writer.
func IsNeedsWriter(err error) bool {
	var nw *NeedsWriterError
	return errors.As(err, &nw)
}

func (v *View) Name() string { return v.fd.name }

// Bookmark is the copy's applied TXID.
func (v *View) Bookmark() dbhost.Bookmark { return dbhost.Bookmark(v.fd.f.Pos().TXID) }

func (v *View) Read(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	fd := v.fd
	fd.gate.RLock()
	defer fd.gate.RUnlock()
	if fd.closed {
		return 0, dberr.ForDatabase(dberr.CodeUnavailable, fd.name, "database "+quote(fd.name)+": this replica stopped following (it is taking the write role or shutting down); retry")
	}
	var c *sqlconn.Handle
	select {
	case c = <-fd.readers:
	case <-ctx.Done():
		return 0, sqlconn.Translate(ctx.Err())
	}
	defer func() { fd.readers <- c }()
	bm := v.Bookmark() // applied before the read began, so the read sees at least this
	err := c.Call(fn)
	if !c.Autocommit() {
		_ = c.Run("ROLLBACK")
	}
	return bm, err
}

func (v *View) Write(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	return 0, &NeedsWriterError{Name: v.fd.name}
}

func (v *View) Session(ctx context.Context) (dbhost.Session, error) {
	return nil, &NeedsWriterError{Name: v.fd.name}
}

// StatementsReadOnly reports whether every statement of sqls is read-only
// as db's read connection prepares it: SQLite's own verdict, the one
// dbhost.RunAuto goes by. A statement that does not prepare there, or that
// needs a connection of its own, is not. A server that does not write db
// asks this before it answers a request from its read replica.
func StatementsReadOnly(ctx context.Context, db dbhost.Database, sqls []string) bool {
	if len(sqls) == 0 {
		return true
	}
	_, err := db.Read(ctx, func(c sqlconn.Conn) error {
		for _, q := range sqls {
			if d, err := c.Describe(ctx, q); err != nil || !d.ReadOnly {
				return dbhost.ErrWriteNeeded
			}
		}
		return nil
	})
	return err == nil
}
