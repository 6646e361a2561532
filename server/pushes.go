package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/httperr"
	"github.com/sluicedb/sluice/server/push"
)

// Pushes between instances (package push): the lease holder streams
// "TXID N is in the bucket" to the instances that follow the database, so
// their copies fetch it at once, and "released" when it releases the lease,
// so a waiting instance takes it at once. The bucket stays the source of
// truth: followers still fetch by name, and poll as before when the stream
// is cut or the holder cannot be reached (lease.poll-only turns the
// subscriptions off).

// pushes is the server's share of it.
type pushes struct {
	hub    *push.Hub
	client *push.Client
	self   atomic.Value // string: this instance's advertised URL
}

// initPush prepares the hub and the client (before the read replicas and
// the host, which call into them).
func (s *Server) initPush() {
	s.push = &pushes{hub: push.NewHub(0, 0)}
	s.push.self.Store("")
	s.push.client = &push.Client{Token: s.pushToken, Logger: s.log}
}

// shipped is the host's OnShipped: the embedded replicas' history, and the
// push to subscribers.
func (s *Server) shipped(db string, f replica.LTXFile, body []byte) {
	s.syncHistory.Shipped(db, f, body)
	s.push.hub.Shipped(db, uint64(f.MaxTXID))
}

// followedElsewhere reports whether another instance subscribed to this
// writer's pushes of db (dbhost.Options.Followed).
func (s *Server) followedElsewhere(db string) bool { return s.push.hub.Followed(db) }

// setPushSelf records this instance's URL, never subscribed to.
func (s *Server) setPushSelf(url string) {
	s.push.self.Store(url)
	s.push.client.Self = url
}

// pushToken is the credential this instance presents to another: a
// configured token that may read name (every instance of a deployment
// shares its tokens), one that may write it if there is one (the holder
// hands its lease only to such a subscriber). With JWTs only there is
// none: the holder refuses the subscription and this instance polls.
func (s *Server) pushToken(name string) string {
	found := ""
	for _, t := range s.cfg.Tokens {
		if len(t.Databases) == 0 || slices.Contains(t.Databases, name) {
			if t.Access != "ro" {
				return t.Token
			}
			if found == "" {
				found = t.Token
			}
		}
	}
	return found
}

// subscribeFollower keeps name's copy told of what the holder ships
// (followers.Options.Subscribe).
func (s *Server) subscribeFollower(ctx context.Context, name string, wake func(txid uint64)) {
	if s.cfg.Lease.PollOnly {
		return
	}
	store := replica.Sub(s.store, name)
	holder := func(ctx context.Context) (string, error) {
		rec, _, err := lease.Read(ctx, store)
		if err != nil {
			return "", err
		}
		if rec.Released() || rec.Expired(time.Now()) {
			return "", nil
		}
		return rec.URL, nil
	}
	s.push.client.Follow(ctx, name, holder, push.Events{
		Shipped:  wake,
		Released: func() { wake(0) },
		Ended:    func() { wake(0) },
	})
}

// watchLeaseWait listens to the holder while this instance waits for
// name's lease (dbhost.Host.WatchLeaseWaits), as a waiter the holder may
// hand the lease to: its release wakes the waiter, which takes the lease at
// once instead of at its next poll, without a write when the record names
// it (lease.Lease.HandTo), else by a conditional replace of the record the
// holder says it released (no read).
func (s *Server) watchLeaseWait(ctx context.Context, name string, holder func() lease.Record, self lease.Successor, wake lease.Wake) {
	if s.cfg.Lease.PollOnly {
		return
	}
	s.push.client.FollowAs(ctx, name, func(context.Context) (string, error) { return holder().URL, nil },
		push.Events{ReleasedAs: wake, Ended: func() { wake(nil, "") }}, &self)
}

// successor is the instance this writer hands name's lease to when it
// stops (dbhost.Options.Successor): one waiting for it on this writer's
// push stream, with a token that may write name.
func (s *Server) successor(name string, accept func(lease.Successor) bool) (lease.Successor, bool) {
	return s.push.hub.Successor(name, accept)
}

// servePush streams name's events to another instance while this one
// holds name's lease.
func (s *Server) servePush(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !auth.FromContext(r.Context()).CanRead(name) {
		writeError(w, r, dberr.ForDatabase(dberr.CodeForbidden, name, "this credential may not read database "+strconv.Quote(name)))
		return
	}
	l := s.host.HeldLease(name)
	if l == nil || !l.Valid() {
		writeError(w, r, dberr.ForDatabase(dberr.CodeNotLeader, name, "this instance does not write database "+strconv.Quote(name)+
			"; subscribe to the lease holder's URL"))
		return
	}
	var waiter *lease.Successor
	if h := r.Header.Get(push.HeaderWaiter); h != "" && auth.FromContext(r.Context()).CanWrite(name) {
		// Only an instance that may write name is handed its lease.
		var sw lease.Successor
		if json.Unmarshal([]byte(h), &sw) == nil && sw.Holder != "" {
			waiter = &sw
		}
	}
	err := s.push.hub.Serve(w, r, name, l, waiter)
	var full push.ErrFull
	if errors.As(err, &full) || errors.Is(err, push.ErrClosing) {
		w.Header().Set("Retry-After", "10")
		writeError(w, r, httperr.WithStatus(http.StatusServiceUnavailable, dberr.New(dberr.CodeUnavailable, err.Error())))
	}
}
