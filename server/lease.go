package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/forward"
	"github.com/sluicedb/sluice/server/metrics"
)

// Multi-instance mode: each instance writes a database only while it holds
// the database's lease in the bucket (dbhost/leases.go); package forward
// serves the requests of the databases other instances write (from the
// local follower, or at the writer) and hands this instance's databases off
// on shutdown.

// LeaseConfig configures leases.
type LeaseConfig struct {
	// Enabled (the default) writes a database only while holding its lease,
	// so overlapping instances (a deploy) never both write it. The lease is
	// taken when a database opens for writing and released when it closes
	// for being idle (database-idle-timeout), so an idle database costs no
	// request; a newer instance that gets a request for a database an older
	// one holds asks it to hand over (package lease) and becomes the writer
	// within one renewal interval, with or without a route between them.
	Enabled        bool     `yaml:"enabled"`
	TTL            Duration `yaml:"ttl"`             // default 10s
	Advertise      string   `yaml:"advertise"`       // URL other instances forward to; default http://<listen address>
	ForwardTimeout Duration `yaml:"forward-timeout"` // default 10s
	// Follow runs a read-only replica: it never takes a lease, serves reads
	// from followers and forwards everything else to the lease holder.
	Follow       bool     `yaml:"follow"`
	PollInterval Duration `yaml:"poll-interval"` // follower poll, default 200ms
	BookmarkWait Duration `yaml:"bookmark-wait"` // a read's wait for its bookmark, default 5s
	// PollOnly: followers and instances waiting for a lease only poll the
	// bucket, never subscribe to the holder's push stream (pushes.go), for
	// instances that cannot reach each other.
	PollOnly bool `yaml:"poll-only"`
}

func leaseOptions(cfg LeaseConfig, logger *slog.Logger) *lease.Options {
	if !cfg.Enabled || cfg.Follow {
		return nil
	}
	return &lease.Options{Holder: lease.NewHolderID(), URL: cfg.Advertise, TTL: time.Duration(cfg.TTL), Logger: logger}
}

// newForwarder returns the forwarder of multi-instance mode, or nil when
// this instance is alone (it writes every database it serves).
func (s *Server) newForwarder() *forward.Forwarder {
	if !s.cfg.Lease.Enabled && !s.cfg.Lease.Follow {
		return nil
	}
	return forward.New(forward.Config{
		Host:       forwardHost{s.host, s.replicas},
		Store:      s.store,
		Timeout:    time.Duration(s.cfg.Lease.ForwardTimeout),
		WriteError: writeError,
		// A sync from this instance's follower waits for writes
		// forwarded through here (embedded.go).
		Acknowledged: s.replicas.Acknowledged,
	})
}

// forwardHost gives forward the host and the views of the read replicas.
type forwardHost struct {
	*dbhost.Host
	replicas *followers.Set
}

// Get finds where name is written without creating it: routing a request
// is not the request, and a read-only token's request must create nothing
// (the local handler creates the database when its caller may).
func (h forwardHost) Get(ctx context.Context, name string) (dbhost.Database, error) {
	return h.Host.GetExisting(ctx, name)
}

func (h forwardHost) ReadReplica(ctx context.Context, name string, bookmark dbhost.Bookmark) (forward.Replica, error) {
	v, err := h.replicas.View(ctx, name, bookmark)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// released is the host's OnReleased: a closing instance forwards the
// requests that still reach it to the holder the record names, from now.
func (s *Server) released(name string, rec lease.Record) {
	if s.forward != nil {
		s.forward.Released(name, rec)
	}
}

// advertise sets the URL written into this instance's leases.
func (s *Server) advertise(ln net.Listener) {
	url := s.cfg.Lease.Advertise
	if url == "" {
		scheme := "http://"
		if s.cert != nil {
			scheme = "https://"
		}
		url = scheme + ln.Addr().String()
	}
	url = strings.TrimRight(url, "/")
	s.host.SetAdvertiseURL(url)
	s.setPushSelf(url)
	if s.forward != nil {
		s.forward.SetSelf(url)
	}
}

// perDatabase serves a route of one database: local answers while this
// instance writes it (always, with one instance); otherwise forward decides
// between the follower (read, nil if the route never reads there) and the
// writer.
func (s *Server) perDatabase(local http.HandlerFunc, read *forward.Reader) http.HandlerFunc {
	if s.forward == nil {
		return local
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.PathValue("name") == "" { // Hrana version probes
			local(w, r)
			return
		}
		name := r.PathValue("name")
		if name == "" {
			name = hranaDatabaseName(r)
		}
		if dbhost.ValidateName(name) != nil || !mayRoute(r, name) {
			// local refuses the invalid name or the token, before any
			// lease or bucket request is made for a name it may not use.
			local(w, r)
			return
		}
		s.forward.Serve(w, r, name, local, read)
	}
}

// mayRoute reports whether the request's token may do what its method asks
// of name at all: read it, or for PUT and DELETE (create, delete) write it.
func mayRoute(r *http.Request, name string) bool {
	p := auth.FromContext(r.Context())
	if r.Method == http.MethodPut || r.Method == http.MethodDelete {
		return p.CanWrite(name)
	}
	return p.CanRead(name)
}

// registerFollowerMetrics exports every follower's lag.
func (s *Server) registerFollowerMetrics() {
	stat := func(f func(followers.Stats) float64) func() []metrics.Sample {
		return func() []metrics.Sample {
			if s.replicas == nil {
				return nil
			}
			var out []metrics.Sample
			for _, st := range s.replicas.Stats() {
				out = append(out, metrics.Sample{Labels: []string{st.Name}, Value: f(st)})
			}
			return out
		}
	}
	db := []string{"db"}
	s.metrics.reg.GaugeFunc("sluice_follower_txid", "TXID the follower (read replica) has applied.", db,
		stat(func(st followers.Stats) float64 { return float64(st.TXID) }))
	s.metrics.reg.GaugeFunc("sluice_follower_lag_txids", "TXIDs known to exist in the replica (from bookmarks and checks) that the follower has not applied.", db,
		stat(func(st followers.Stats) float64 { return float64(st.LagTXIDs) }))
	s.metrics.reg.GaugeFunc("sluice_follower_lag_seconds", "Delay between the writer's upload and the follower's apply of the last file.", db,
		stat(func(st followers.Stats) float64 { return st.Lag.Seconds() }))
	s.metrics.reg.GaugeFunc("sluice_follower_behind_seconds", "0 when caught up; else the age of the last applied file.", db,
		stat(func(st followers.Stats) float64 { return st.Behind.Seconds() }))
}
