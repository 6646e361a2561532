// Package forward serves the requests of a database this instance does not
// write. Each database has one writer, the holder of its lease (package
// lease); every other instance either answers a request from its local
// follower, when the request only reads (decided before anything runs), or
// proxies it to the writer and passes the writer's answer back. While this
// instance hands its databases off on shutdown, it proxies to whoever takes
// each over.
//
// It imports lease, replica, server/dbhost and server/followers; the front door (package
// server) asks it, and gives it each protocol's read path as a Reader.
package forward

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/dbhost"
)

// Host is what forwarding needs of the database host (dbhost.Host) and of
// the read replicas (package server/followers).
type Host interface {
	// Get returns the database when this instance writes it, and a
	// *dbhost.NotLeaderError naming the writer when another one does; it
	// need not create a missing database (the local handler does).
	Get(ctx context.Context, name string) (dbhost.Database, error)
	// ReadReplica returns the local follower's read-only database once it
	// has applied bookmark (followers.Set.View).
	ReadReplica(ctx context.Context, name string, bookmark dbhost.Bookmark) (Replica, error)
}

// Replica is a follower's read-only database: its Write and Session fail
// with a *followers.NeedsWriterError.
type Replica interface {
	dbhost.Database
	// Bookmark is the position the follower has applied.
	Bookmark() dbhost.Bookmark
}

// Config configures a Forwarder.
type Config struct {
	Host Host
	// Store is the bucket, where a released database's next lease appears.
	Store replica.Store
	// Timeout bounds a request's wait for a reachable writer [10s].
	Timeout time.Duration
	// WriteError answers a request with an error in its protocol's shape.
	WriteError func(http.ResponseWriter, *http.Request, error)
	// Acknowledged, if set, hears the bookmark (TXID) of every successful
	// answer the writer gave a proxied request.
	Acknowledged func(name string, txid uint64)
}

// Forwarder routes the requests of databases another instance writes.
type Forwarder struct {
	cfg     Config
	self    string // this instance's advertised URL
	handoff handoff
	watches leaseWatches // the lease reads of toNextWriter, one per database
}

// New returns a Forwarder; call SetSelf before it serves.
func New(cfg Config) *Forwarder {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Forwarder{cfg: cfg}
}

// SetSelf sets the URL other instances reach this one at: a lease naming
// it is this instance's own, never a target.
func (f *Forwarder) SetSelf(url string) { f.self = url }

// Serve answers a request for database name. local is the route's handler
// here; read, nil for routes a follower never answers, is the route's read
// path on a follower. In order:
//
//  1. During the hand-off, the request goes to the database's next writer.
//  2. When name is opened cold here and its lease is not settled yet, a
//     pure read is answered from the cold view (coldRead); anything else
//     waits for the lease to settle.
//  3. When this instance writes name, local answers.
//  4. A request another instance forwarded is not forwarded again.
//  5. When read says, before anything runs, that the follower may answer,
//     it does (followerRead).
//  6. Otherwise the writer answers, through the proxy (toWriter).
func (f *Forwarder) Serve(w http.ResponseWriter, r *http.Request, name string, local http.HandlerFunc, read *Reader) {
	deadline := time.Now().Add(f.cfg.Timeout)
	if !f.handoff.enterLocal() {
		f.toNextWriter(w, r, name, deadline)
		return
	}
	defer f.handoff.leaveLocal()
	db, err := f.cfg.Host.Get(r.Context(), name)
	if err == nil && dbhost.AwaitsLease(db) && read != nil && r.Method == http.MethodPost {
		// Opened cold, its lease not settled: a pure read runs on the view
		// now (cold.go); anything else waits for the lease below.
		if body, berr := readBody(r); berr == nil && f.coldRead(w, r, db, body, read) {
			return
		}
	}
	elsewhere := f.settledWriter(r, db, err)
	if elsewhere == nil {
		local(w, r)
		return
	}
	if by := r.Header.Get(HeaderForwardedBy); by != "" {
		if elsewhere = f.awaitHandedTo(r, name, by, elsewhere, deadline); elsewhere != nil {
			f.cfg.WriteError(w, r, elsewhere)
			return
		}
		local(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.cfg.WriteError(w, r, bodyError(err))
		return
	}
	if read != nil && f.followerRead(w, r, name, body, read) {
		return
	}
	f.toWriter(w, r, name, body, elsewhere, deadline, local)
}

// handedToWait bounds how long a request forwarded by the instance this one
// takes for the writer waits for this instance to become the writer.
const handedToWait = time.Second

// awaitHandedTo is for a request another instance forwarded here (by, its
// URL) while this instance takes that very instance for name's writer:
// each says the other writes, which is a hand-over to this instance under
// way (lease.Lease.HandTo: the record names it a moment before it hears
// so). It waits, briefly, for this instance to become the writer (nil) or
// for the lease to name a third one, and returns who writes then.
func (f *Forwarder) awaitHandedTo(r *http.Request, name, by string, elsewhere *dbhost.NotLeaderError, deadline time.Time) *dbhost.NotLeaderError {
	until := time.Now().Add(handedToWait)
	if deadline.Before(until) {
		until = deadline
	}
	for elsewhere != nil && elsewhere.Leader.URL == by && time.Now().Before(until) {
		select {
		case <-r.Context().Done():
			return elsewhere
		case <-time.After(5 * time.Millisecond):
		}
		elsewhere = f.writerElsewhere(r, name)
	}
	return elsewhere
}

// writerElsewhere returns the lease holder when another instance writes
// name, and nil when this one does (or Get failed otherwise: the local
// handler reports that).
func (f *Forwarder) writerElsewhere(r *http.Request, name string) *dbhost.NotLeaderError {
	db, err := f.cfg.Host.Get(r.Context(), name)
	return f.settledWriter(r, db, err)
}

// settledWriter is writerElsewhere for what Get returned.
func (f *Forwarder) settledWriter(r *http.Request, db dbhost.Database, err error) *dbhost.NotLeaderError {
	if err == nil {
		// A database opened cold answers before its lease is settled; if
		// another instance holds it, the request is that instance's.
		err = dbhost.AwaitWriter(r.Context(), db)
	}
	var nl *dbhost.NotLeaderError
	if errors.As(err, &nl) {
		return nl
	}
	return nil
}

// toWriter proxies the request to the writer. With no reachable writer it
// waits for one (or for this instance to take the lease, then local
// answers) until deadline, then answers the not-leader error (retryable).
func (f *Forwarder) toWriter(w http.ResponseWriter, r *http.Request, name string, body []byte,
	elsewhere *dbhost.NotLeaderError, deadline time.Time, local http.HandlerFunc) {
	for {
		rec := elsewhere.Leader
		if rec.URL != "" && rec.URL != f.self && !rec.Expired(time.Now()) && f.proxy(w, r, name, body, rec, deadline) {
			return
		}
		if time.Now().After(deadline) {
			f.cfg.WriteError(w, r, elsewhere)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		if elsewhere = f.writerElsewhere(r, name); elsewhere == nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			local(w, r)
			return
		}
	}
}

func bodyError(err error) error {
	return dberr.New(dberr.CodeBadRequest, "read request body: "+err.Error())
}
