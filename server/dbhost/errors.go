package dbhost

import (
	"strconv"

	"github.com/sluicedb/sluice/server/dberr"
)

// NotDurableError answers a write that committed locally but whose upload
// failed: the data stays and the next successful upload ships it, so running
// the write again would apply it twice. It is not an invitation to retry
// (no Retry-After); Bookmark is the commit's position, durable once the
// database's durable bookmark reaches it. The HTTP layers answer it with the
// bookmark so the client can ask later, or retry with the same
// Idempotency-Key, which replays instead of running again.
type NotDurableError struct {
	Err      *dberr.Error
	Bookmark Bookmark
}

func (e *NotDurableError) Error() string { return e.Err.Error() }
func (e *NotDurableError) Unwrap() error { return e.Err }

func notDurable(db string, b Bookmark, cause error) *NotDurableError {
	return &NotDurableError{Bookmark: b, Err: dberr.ForDatabase(dberr.CodeNotDurable, db,
		"database "+quote(db)+": the write was committed locally but the upload to the replica failed ("+cause.Error()+
			"); it is kept and shipped by the next successful upload, so do not run it again: it is durable once the database's durable bookmark reaches "+
			strconv.FormatUint(uint64(b), 10)+" (GET /v1/databases/"+db+"/bookmark/"+strconv.FormatUint(uint64(b), 10)+"), or retry with the same Idempotency-Key")}
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}
