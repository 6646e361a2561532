package dbhost

import (
	"context"
	"errors"

	"github.com/sluicedb/sluice/internal/sqltext"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// ErrWriteNeeded is what a RunAuto callback returns when, on a read
// connection, a statement turned out to write (the schema changed between
// classifying and running it): RunAuto then runs the callback again in a
// write group. Nothing ran on the read connection can have written.
var ErrWriteNeeded = errors.New("dbhost: the request writes; it runs in a write group")

// RunAuto runs fn where its statements belong, as SQLite itself classifies
// them when it prepares them (sqlite3_stmt_readonly), on the connection and
// schema at hand: on a pooled read connection when every statement of sqls
// is read-only there, in the next write group otherwise. A statement that
// does not prepare on the read connection (it may use a table an earlier
// statement creates) goes to the write group, which reports its real error.
// onReader tells fn that it runs on a read connection: a write it meets
// there should make it return ErrWriteNeeded. A read-only principal's
// requests always run on a read connection, and their writes fail there.
//
// Statements that change the connection itself (dberr.ErrNeedsOwnConnection) fail
// on both; the caller then runs the request on a Session.
func RunAuto(ctx context.Context, db Database, sqls []string, fn func(c sqlconn.Conn, onReader bool) error) (Bookmark, error) {
	if _, ro := db.(readOnlyDB); ro {
		return db.Read(ctx, func(c sqlconn.Conn) error { return fn(c, false) })
	}
	bm, err := db.Read(ctx, func(c sqlconn.Conn) error {
		for _, q := range sqls {
			// BEGIN, COMMIT and ROLLBACK are read-only to SQLite, but the
			// request is one transaction: the write group refuses them with
			// the reason, where a read connection would run them as no-ops.
			if sqltext.Classify(q).IsTxControl() {
				return ErrWriteNeeded
			}
			d, err := c.Describe(ctx, q)
			if errors.Is(err, dberr.ErrNeedsOwnConnection) {
				return err
			}
			if err != nil || !d.ReadOnly {
				return ErrWriteNeeded
			}
		}
		err := fn(c, true)
		if errors.Is(err, dberr.ErrReadOnly) {
			return ErrWriteNeeded
		}
		return err
	})
	if errors.Is(err, ErrWriteNeeded) {
		return db.Write(ctx, func(c sqlconn.Conn) error { return fn(c, false) })
	}
	return bm, err
}
