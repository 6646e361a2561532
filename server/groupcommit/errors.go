package groupcommit

import (
	"strconv"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/superfly/ltx"
)

// NotDurableError answers a write that committed locally but whose upload
// failed: the data stays and the next successful upload ships it, so running
// the write again would apply it twice. It is not an invitation to retry
// (no Retry-After); TXID is the commit's position (its bookmark), durable
// once the database's durable bookmark reaches it. The HTTP layers answer it
// with the bookmark so the client can ask later, or retry with the same
// Idempotency-Key, which replays instead of running again.
type NotDurableError struct {
	Err  *dberr.Error
	TXID ltx.TXID
}

func (e *NotDurableError) Error() string { return e.Err.Error() }
func (e *NotDurableError) Unwrap() error { return e.Err }

func notDurable(db string, txid ltx.TXID, cause error) *NotDurableError {
	n := strconv.FormatUint(uint64(txid), 10)
	return &NotDurableError{TXID: txid, Err: dberr.ForDatabase(dberr.CodeNotDurable, db,
		"database "+quote(db)+": the write was committed locally but the upload to the replica failed ("+cause.Error()+
			"); it is kept and shipped by the next successful upload, so do not run it again: it is durable once the database's durable bookmark reaches "+
			n+" (GET /v1/databases/"+db+"/bookmark/"+n+"), or retry with the same Idempotency-Key")}
}

// FencedError answers every write to db once another writer owns its replica.
func FencedError(db string) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeUnavailable, db, "database "+quote(db)+
		": stopped taking writes: another writer owns its replica (fenced); nothing more is acknowledged. Restart the server that should own it")
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}
