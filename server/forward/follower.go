package forward

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
)

// Reads on an instance that does not write a database are answered by its
// follower (package server/followers) when the request, judged before anything
// runs, only reads: its protocol says so from the body (no stream to
// continue or leave open, no transaction that needs a session), and SQLite,
// preparing its statements on the follower, finds every one read-only. A
// read carrying a bookmark (the Sluice-Bookmark header, or Hrana's
// replication_index) first waits until the follower has applied it.
//
// One case is only known while the request runs: a write that SQLite meets
// only when stepping, or a transaction a batch leaves open. The follower's
// database refuses it with a *followers.NeedsWriterError; the protocol's read
// path returns that error before it has answered anything, and the request
// goes to the writer.

// Reader is one protocol's read path on a follower.
type Reader struct {
	// Inspect judges the request from its method, path and body alone.
	Inspect func(r *http.Request, body []byte) Read
	// Serve answers the request on db, the follower's read-only database.
	// It returns a *followers.NeedsWriterError, having written nothing, when
	// the request needs the writer after all; it answers everything else.
	Serve func(w http.ResponseWriter, r *http.Request, db dbhost.Database) error
}

// Read is a Reader's verdict on one request, before it runs.
type Read struct {
	// Replica: the follower may answer if every statement of Statements is
	// read-only there. False: the request belongs to the writer.
	Replica    bool
	Statements []string
	// Bookmark is a position the body asks for (Hrana's
	// replication_index); the header's is read here.
	Bookmark dbhost.Bookmark
}

// followerRead answers the request from name's follower when read allows
// it, and reports whether it answered. A bookmark the follower does not
// reach in time is answered (a retryable LAGGING); other follower failures
// leave the request to the writer.
func (f *Forwarder) followerRead(w http.ResponseWriter, r *http.Request, name string, body []byte, read *Reader) bool {
	verdict, bookmark, err := judgeRead(r, body, read)
	if err != nil {
		f.cfg.WriteError(w, r, err)
		return true
	}
	if !verdict.Replica {
		return false
	}
	view, err := f.cfg.Host.ReadReplica(r.Context(), name, bookmark)
	if err != nil {
		if bookmark > 0 && errors.Is(err, dberr.ErrLagging) {
			f.cfg.WriteError(w, r, err)
			return true
		}
		return false
	}
	return f.answerRead(w, r, body, read, verdict.Statements, view)
}

// judgeRead is read's verdict on a request, before anything runs:
// verdict.Replica is false for a request a replica may not answer (any but
// a POST), and bookmark the newer of the header's and the body's. An error
// is a malformed bookmark header, to be answered.
func judgeRead(r *http.Request, body []byte, read *Reader) (verdict Read, bookmark dbhost.Bookmark, err error) {
	if read == nil || r.Method != http.MethodPost {
		return Read{}, 0, nil
	}
	verdict = read.Inspect(r, body)
	if !verdict.Replica {
		return verdict, 0, nil
	}
	bookmark, err = headerBookmark(r)
	return verdict, max(bookmark, verdict.Bookmark), err
}

// answerRead answers a request judged a pure read on view (a follower's
// database, or a cold open's view) if SQLite finds every one of statements
// read-only there, and reports whether it answered: a request that needs
// the writer after all (a *followers.NeedsWriterError before anything was
// written) is left to the caller.
func (f *Forwarder) answerRead(w http.ResponseWriter, r *http.Request, body []byte, read *Reader, statements []string, view Replica) bool {
	if !followers.StatementsReadOnly(r.Context(), view, statements) {
		return false
	}
	answer := &replicaAnswer{ResponseWriter: w, view: view}
	r.Body = io.NopCloser(bytes.NewReader(body))
	err := read.Serve(answer, r, view)
	switch {
	case err == nil:
		return true
	case answer.started:
		// The read path broke its contract; the client has its answer.
		return true
	case followers.IsNeedsWriter(err):
		return false // the fallback: the writer runs the request
	}
	f.cfg.WriteError(w, r, err)
	return true
}

// headerBookmark is the request's Sluice-Bookmark (0: none).
func headerBookmark(r *http.Request) (dbhost.Bookmark, error) {
	v := r.Header.Get(dbhost.BookmarkHeader)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, dberr.New(dberr.CodeBadRequest, dbhost.BookmarkHeader+" "+strconv.Quote(v)+" is not a TXID (a decimal number from a previous response)")
	}
	return dbhost.Bookmark(n), nil
}

// replicaAnswer marks the follower's answer as it starts: served by the
// replica, at the follower's position unless the handler named the one its
// read reflected.
type replicaAnswer struct {
	http.ResponseWriter
	view    Replica
	started bool
}

func (a *replicaAnswer) start() {
	if a.started {
		return
	}
	a.started = true
	h := a.Header()
	if h.Get(dbhost.BookmarkHeader) == "" {
		h.Set(dbhost.BookmarkHeader, strconv.FormatUint(uint64(a.view.Bookmark()), 10))
	}
	h.Set(HeaderServedBy, ServedByReplica)
}

func (a *replicaAnswer) WriteHeader(code int) {
	a.start()
	a.ResponseWriter.WriteHeader(code)
}

func (a *replicaAnswer) Write(p []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(p)
}

func (a *replicaAnswer) Flush() {
	a.start()
	if fl, ok := a.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}
