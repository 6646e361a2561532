package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/sluicedb/sluice/server/dbhost"
)

// Embedded replicas' sync requests on an instance that does not write the
// database are answered from its own follower (package followers), not
// proxied to the writer: a replica syncs from the nearest instance, and
// the instance's window of recent pages is fed by the files its follower
// applies. A client that wrote through this instance reads its write back:
// the sync first waits for the follower to apply what the writer
// acknowledged through here.

type followerSyncKey struct{}

// syncRoute serves a sync endpoint: locally when this instance writes the
// database or follows it, else (no follower can start) through the writer.
func (s *Server) syncRoute(local http.HandlerFunc) http.HandlerFunc {
	forwarded := s.perDatabase(local, nil)
	if s.forward == nil || s.replicas == nil {
		return local
	}
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if dbhost.ValidateName(name) != nil || !mayRoute(r, name) ||
			!s.writtenElsewhere(r.Context(), name) {
			forwarded(w, r)
			return
		}
		local(w, r.WithContext(context.WithValue(r.Context(), followerSyncKey{}, name)))
	}
}

// writtenElsewhere reports whether another instance writes name (always,
// on a -follow instance, which asks no lease for it).
func (s *Server) writtenElsewhere(ctx context.Context, name string) bool {
	if s.cfg.Lease.Follow {
		return true
	}
	_, err := s.host.GetExisting(ctx, name)
	var nl *dbhost.NotLeaderError
	return errors.As(err, &nl)
}

// syncFollower is the copy a sync request is answered from when
// syncRoute marked it for the follower (asked after authorisation: the
// copy starts only for a client that may read); ok false: the writer's
// own database.
func (s *Server) syncFollower(ctx context.Context, name string) (dbhost.Database, bool, error) {
	if n, _ := ctx.Value(followerSyncKey{}).(string); n == "" || n != name {
		return nil, false, nil
	}
	v, err := s.replicas.Caught(ctx, name)
	if err != nil {
		return nil, true, err
	}
	return v, true, nil
}

// syncObserver counts embedded replicas' sync answers and the page bytes
// they sent, per database: what a sync costs, for operators.
func (s *Server) syncObserver() func(db, answer string, bytes int64) {
	answers := s.metrics.reg.NewCounter("sluice_embedded_sync_answers_total",
		"Embedded replicas' /export and /sync answers by database and kind (export, diff, database, end).", "db", "answer")
	sent := s.metrics.reg.NewCounter("sluice_embedded_sync_bytes_total",
		"Bytes of pages sent to embedded replicas (/export and /sync), by database.", "db")
	return func(db, answer string, bytes int64) {
		answers.Inc(db, answer)
		sent.Add(float64(bytes), db)
	}
}
