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

// FencedError answers every write to db once this instance stopped being
// its writer (another instance's upload took the next TXID, or the lease
// passed on): the write was not applied anywhere (the local copy holding it
// is dropped, never shipped), so running it again is safe. Retryable.
func FencedError(db string) *dberr.Error {
	return dberr.ForDatabase(dberr.CodeUnavailable, db, "database "+quote(db)+
		": this instance is no longer its writer; the write was not applied; retry (it goes to the current writer)")
}

// lateUpload answers the writes of an upload the store accepted only after
// this instance's lease deadline. The file is in the history (the next
// holder adopts it), so the writes most likely are durable, but another
// instance may have held the lease by then: not an acknowledgement, and not
// an invitation to run them again. Like NotDurableError it names the
// commit's bookmark.
func lateUpload(db string, txid ltx.TXID) *NotDurableError {
	n := strconv.FormatUint(uint64(txid), 10)
	return &NotDurableError{TXID: txid, Err: dberr.ForDatabase(dberr.CodeNotDurable, db,
		"database "+quote(db)+": the write was uploaded only after this instance's lease deadline, when another instance may write the database; "+
			"it is not acknowledged here. Do not run it again: it is in the replica if bookmark "+n+" is reached (GET /v1/databases/"+db+"/bookmark/"+n+
			" at the current writer), or retry with the same Idempotency-Key")}
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return "\"" + s + "\""
}
