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
	if c, ok := r.Database.(*coldDB); ok { // a session waits for the restore
		d, err := c.hydrated(ctx)
		if err != nil {
			return nil, err
		}
		return ReadOnly(d).Session(ctx)
	}
	return nil, dberr.New(dberr.CodeForbidden, "read-only access: interactive sessions are not available")
}

// CurrentBookmark returns the replication position of a database hosted
// here or of a read replica's view (which has a Bookmark method; 0 for
// databases of other implementations), for response headers.
func CurrentBookmark(db Database) Bookmark {
	switch d := db.(type) {
	case *database:
		return d.bookmark()
	case readOnlyDB:
		return CurrentBookmark(d.Database)
	case interface{ Bookmark() Bookmark }:
		return d.Bookmark()
	}
	return 0
}
