package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// A database opened cold (dbhost's cold open) answers before its lease is
// settled. Whether this instance will write it or another one does, a read
// of the state the view shows is what a follower would answer, so a request
// that only reads (judged as for a follower: the protocol's verdict from the
// body, then SQLite's on every statement) runs on the view at once. Writes
// and sessions wait for the lease (dbhost.AwaitWriter), then run here or go
// to the holder; a read that turns out to need the writer while it runs
// goes the same way, having answered nothing.

// coldRead answers the request from db's cold view when read judges it a
// pure read, and reports whether it answered. body is the request's body,
// already read; a read carrying a bookmark newer than the view waits for the
// view to reach it (dbhost's read-your-writes) or for the restored file.
func (f *Forwarder) coldRead(w http.ResponseWriter, r *http.Request, db dbhost.Database, body []byte, read *Reader) bool {
	verdict, bookmark, err := judgeRead(r, body, read)
	if err != nil {
		f.cfg.WriteError(w, r, err)
		return true
	}
	if !verdict.Replica {
		return false
	}
	// The header's bookmark is in the context already (the front door's);
	// Hrana's replication_index is only in the body.
	r = r.WithContext(dbhost.WithReadAfter(r.Context(), bookmark))
	return f.answerRead(w, r, body, read, verdict.Statements, coldView{db})
}

// coldView is a cold-opened database for reads only: a write or a session
// is refused with a *followers.NeedsWriterError, so the read path returns
// before answering and the request waits for the lease. A read that would
// otherwise wait for a restore the lease ended (the view closed because
// another instance holds it) is refused the same way, and goes there.
type coldView struct{ db dbhost.Database }

func (v coldView) Name() string { return v.db.Name() }

func (v coldView) Bookmark() dbhost.Bookmark { return dbhost.CurrentBookmark(v.db) }

func (v coldView) Read(ctx context.Context, fn func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	bm, err := v.db.Read(ctx, fn)
	var nl *dbhost.NotLeaderError
	if errors.As(err, &nl) {
		return 0, &followers.NeedsWriterError{Name: v.db.Name()}
	}
	return bm, err
}

func (v coldView) Write(context.Context, func(sqlconn.Conn) error) (dbhost.Bookmark, error) {
	return 0, &followers.NeedsWriterError{Name: v.db.Name()}
}

func (v coldView) Session(context.Context) (dbhost.Session, error) {
	return nil, &followers.NeedsWriterError{Name: v.db.Name()}
}

// readBody reads the request's body for a decision taken before the handler
// runs and puts it back for the handler. A body that could not be read
// whole (too large, cut) is put back as read, with the same error at its
// end, so the handler that reads it answers as it would have.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
