package dbhost

import (
	"context"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// ReadOnly wraps db for a read-only principal: writes run on a read-only
// connection (so they fail with SQLITE_READONLY) and sessions
// get a query_only connection. The HTTP layers hand this wrapper to the
// protocol handlers, so they need no auth logic of their own.
func ReadOnly(db Database) Database { return readOnlyDB{db} }

type readOnlyDB struct{ Database }

func (r readOnlyDB) Write(ctx context.Context, fn func(sqlconn.Conn) error) (Bookmark, error) {
	return r.Database.Read(ctx, fn)
}

func (r readOnlyDB) Session(ctx context.Context) (Session, error) {
	if d, ok := r.Database.(*database); ok {
		return d.session(ctx, true)
	}
	return nil, dberr.New(dberr.CodeForbidden, "read-only access: interactive sessions are not available")
}

// StatementsReadOnly reports whether every statement of sqls is read-only
// as db's read connection prepares it: SQLite's own verdict, the one RunAuto
// goes by. A statement that does not prepare there, or that needs a
// connection of its own, is not. A server that does not write db asks this
// before it answers a request from its read replica.
func StatementsReadOnly(ctx context.Context, db Database, sqls []string) bool {
	if len(sqls) == 0 {
		return true
	}
	_, err := db.Read(ctx, func(c sqlconn.Conn) error {
		for _, q := range sqls {
			if d, err := c.Describe(ctx, q); err != nil || !d.ReadOnly {
				return ErrWriteNeeded
			}
		}
		return nil
	})
	return err == nil
}

// CurrentBookmark returns the replication position of a database hosted
// here (0 for databases of other implementations), for response headers.
func CurrentBookmark(db Database) Bookmark {
	switch d := db.(type) {
	case *database:
		return d.bookmark()
	case readOnlyDB:
		return CurrentBookmark(d.Database)
	case *ReplicaView:
		return d.Bookmark()
	}
	return 0
}
