// Package server is sluice serve's HTTP front door: it wires the database
// host (dbhost) to the replica, mounts the JSON API (jsonapi) and Hrana
// (hrana) behind authentication (auth) and request limits, sends the
// requests of databases another instance writes through forward, exports
// /metrics, /health and /version, and shuts down gracefully.
//
// It imports every server/... package, replica/replicaurl, engine and
// compact (through dbhost's wiring); only cmd/sluice imports it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/sqliteconn"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/watch"
	"github.com/sluicedb/sluice/server/auth"
	"github.com/sluicedb/sluice/server/dbhost"
	"github.com/sluicedb/sluice/server/followers"
	"github.com/sluicedb/sluice/server/forward"
	"github.com/sluicedb/sluice/server/groupcommit"
	"github.com/sluicedb/sluice/server/hrana"
	"github.com/sluicedb/sluice/server/libsqlsync"
	"github.com/sluicedb/sluice/server/timetravel"
)

// DefaultSQLiteMemory is what SQLite may hold across every database unless
// configured: enough for a few busy databases' page caches; a hundred share it.
const DefaultSQLiteMemory = 64 << 20

// sqliteMemory is the SQLite soft heap limit to set (0: none).
func sqliteMemory(l Limits) int64 {
	switch {
	case l.SQLiteMemory < 0:
		return 0
	case l.SQLiteMemory == 0:
		return DefaultSQLiteMemory
	}
	return int64(l.SQLiteMemory)
}

// DefaultMaxBodyBytes is the request body limit unless configured.
const DefaultMaxBodyBytes = 8 << 20

// Server is a configured sluice serve.
type Server struct {
	cfg     Config
	log     *slog.Logger
	version string
	store   replica.Store
	host    *dbhost.Host
	// replicas are the read replicas of the databases other instances
	// write (multi-instance mode); empty otherwise.
	replicas *followers.Set
	hrana    *hrana.Handler
	auth     *auth.Authenticator
	metrics  *serverMetrics
	watch    *watch.Watch  // the replica's readiness (/ready)
	damage   *watch.Damage // damaged replica objects not healed yet (/ready, metrics)
	compact  *compaction
	past     *timetravel.Cache // past states restored for time-travel reads
	handler  http.Handler
	cert     *certFiles // nil: plain HTTP

	forward    *forward.Forwarder // nil with one instance (leases and following off)
	hostClosed bool
	served     atomic.Bool // Serve ran: only then does Close report a shutdown

	lim         HTTPLimits // with defaults filled in (limits_http.go)
	quotas      *dbQuotas
	wsConns     *wsCounts
	syncHistory *libsqlsync.History // recently shipped pages, for embedded replicas' syncs
	sync        *libsqlsync.Handler
	push        *pushes // the push stream between instances (pushes.go)
}

// NewWithStore validates cfg and prepares the handler over store, which the
// server closes on Close. It refuses a non-loopback listen address without
// credentials unless AllowUnauthenticatedRemote is set.
func NewWithStore(cfg Config, store replica.Store, logger *slog.Logger, version string) (*Server, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var durability groupcommit.Durability
	switch cfg.Durability {
	case "", "sync":
		durability = groupcommit.Sync
	case "async":
		durability = groupcommit.Async
	default:
		return nil, fmt.Errorf("durability %q: use sync or async", cfg.Durability)
	}
	if cfg.IdempotencyWindow < 0 {
		return nil, fmt.Errorf("idempotency window %s: give a positive duration such as 24h", time.Duration(cfg.IdempotencyWindow))
	}
	if cfg.Compaction.Workers < 0 {
		return nil, fmt.Errorf("compaction workers %d: use a positive number, or 0 for the default", cfg.Compaction.Workers)
	}
	if cfg.Group.CommitWindow < 0 || time.Duration(cfg.Group.CommitWindow) > time.Second {
		return nil, fmt.Errorf("commit window %s: give a duration from 0 to 1s, such as 5ms (0: upload at once)", time.Duration(cfg.Group.CommitWindow))
	}
	if cfg.Group.UploadPipeline < 0 || cfg.Group.UploadPipeline > replica.MaxInFlight {
		return nil, fmt.Errorf("upload pipeline %d: give 1 to %d uploads in flight per database, or 0 for the default (%d)", cfg.Group.UploadPipeline, replica.MaxInFlight, dbhost.DefaultUploadPipeline)
	}
	if cfg.Limits.MaxConcurrentUploads < 0 {
		return nil, fmt.Errorf("max-concurrent-uploads %d: use a positive number, or 0 for the default (%d)", cfg.Limits.MaxConcurrentUploads, dbhost.DefaultMaxUploads)
	}
	if cfg.Limits.MaxOpenDatabases < 0 {
		return nil, fmt.Errorf("max-open-databases %d: use a positive number, or 0 for the default", cfg.Limits.MaxOpenDatabases)
	}
	a, err := newAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	cert, err := loadCertFiles(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	if !a.Required() && !cfg.AllowUnauthenticatedRemote && !IsLoopback(cfg.Listen) {
		return nil, fmt.Errorf("refusing to listen on %s without authentication: configure a token (-token or tokens: in the config) or a JWT key, listen on 127.0.0.1, or pass -allow-unauthenticated-remote", cfg.Listen)
	}
	if err := cfg.Limits.HTTPLimits.check(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: logger, version: version, store: store, auth: a, cert: cert, lim: cfg.Limits.HTTPLimits.withDefaults()}
	if cfg.Limits.MaxResponseBytes == 0 && s.lim.MaxResponseBytes < cfg.Limits.MaxBodyBytes {
		s.lim.MaxResponseBytes = cfg.Limits.MaxBodyBytes // what a client may send, it may read back
	}
	s.watch = watch.New(store, time.Duration(cfg.ReplicaErrorBudget)).SetStallThreshold(time.Duration(cfg.StallThreshold))
	if cfg.Lease.Follow {
		s.watch.ReadOnly() // a read replica never writes the bucket
	}
	s.metrics = newServerMetrics(func() []dbhost.Stats {
		if s.host == nil {
			return nil
		}
		return s.host.Stats()
	}, s.watch)
	s.damage = s.newDamage()
	s.metrics.reg.BoundLabel("db", s.lim.MetricsDatabases, "_other")
	s.compact = newCompaction(cfg.Compaction)
	s.compact.register(s.metrics.reg)
	s.registerColdOpen(s.metrics.reg)
	counted := s.metrics.countPuts(store)
	s.syncHistory = libsqlsync.NewHistory(0)
	s.initPush()
	s.replicas = followers.New(followers.Options{
		DataDir:          cfg.DataDir,
		Store:            counted,
		ReadConns:        cfg.Limits.ReadConnections,
		StatementTimeout: time.Duration(cfg.Limits.StatementTimeout),
		PollInterval:     time.Duration(cfg.Lease.PollInterval),
		BookmarkWait:     time.Duration(cfg.Lease.BookmarkWait),
		Logger:           logger,
		Damage:           s.damage,
		Subscribe:        s.subscribeFollower,
		OnApplied:        s.syncHistory.Shipped, // embedded replicas sync from the follower too
	})
	s.host, err = dbhost.New(dbhost.Options{
		DataDir:          cfg.DataDir,
		Store:            counted,
		Replication:      dbhost.EngineReplication(logger, s.compact.perDatabase()),
		Durability:       durability,
		StatementTimeout: time.Duration(cfg.Limits.StatementTimeout),
		UploadTimeout:    time.Duration(cfg.Limits.UploadTimeout),
		MaxGroupRequests: cfg.Group.MaxRequests,
		ReadConns:        cfg.Limits.ReadConnections,
		MaxSessions:      cfg.Limits.MaxSessions,
		MaxReadSessions:  cfg.Limits.MaxReadSessions,
		MaxOpen:          cfg.Limits.MaxOpenDatabases,
		IdleTimeout:      time.Duration(cfg.Limits.DatabaseIdleTimeout),
		ExternalPoll:     time.Duration(cfg.Limits.ExternalWritePoll),
		Logger:           logger,
		Observer:         s.metrics,
		OnShipped:        s.shipped, // the embedded replicas' history and the push to followers
		Lease:            leaseOptions(cfg.Lease, logger),
		FollowOnly:       cfg.Lease.Follow,
		OnWriterOpening:  s.replicas.Drop,  // the writer restores from the bucket, at least as new
		AdoptCopy:        s.replicas.Adopt, // unless the follower is exactly where the last writer released the lease
		Followed:         s.followedElsewhere,
		Successor:        s.successor,
		OnReleased:       s.released,
		Damage:           s.damage,

		IdempotencyWindow: time.Duration(cfg.IdempotencyWindow),
		CommitWindow:      time.Duration(cfg.Group.CommitWindow),
		MaxUploads:        cfg.Limits.MaxConcurrentUploads,
		UploadPipeline:    cfg.Group.UploadPipeline,
		Stall:             s.watch,
		WriteStallTimeout: time.Duration(cfg.WriteStallTimeout),
		IdleWriteTimeout:  time.Duration(cfg.Limits.IdleWriteTimeout),
		PinnedSessionIdle: time.Duration(cfg.Limits.PinnedSessionIdle),
		ColdOpen:          coldOpenOptions(cfg),
	})
	if err != nil {
		s.compact.stop()
		return nil, err
	}
	s.hrana = hrana.NewHandler(hrana.Config{
		IdleTimeout: time.Duration(cfg.Hrana.IdleTimeout),
		TxTimeout:   time.Duration(cfg.Hrana.TxTimeout),
		Logger:      logger,
		Version:     version,

		MaxStreamsPerToken:    cfg.Hrana.MaxStreamsPerToken,
		MaxStreamsPerDatabase: cfg.Hrana.MaxStreamsPerDatabase,
		MaxStreams:            cfg.Hrana.MaxStreams,
		MaxSessionsPerToken:   cfg.Hrana.MaxSessionsPerToken,
		RequestTimeout:        time.Duration(cfg.Limits.RequestTimeout),
		MaxResponseBytes:      int64(s.lim.MaxResponseBytes), // every statement of a request counts toward it

		// Isolation between clients (isolation.go).
		MaxPinnedDatabases:         maxPinnedDatabases(cfg.Limits, s.host.MaxOpen()),
		MaxPipelineStatements:      cfg.Limits.MaxPipelineStatements,
		MaxConcurrentLongPipelines: cfg.Limits.MaxConcurrentLongPipelines,

		MaxBodyBytes:            maxBodyBytes(cfg.Limits),
		WebSocketIdleTimeout:    time.Duration(cfg.Hrana.WebSocketIdleTimeout),
		MaxStreamsPerConnection: cfg.Hrana.MaxStreamsPerConnection,
	})
	if s.past, err = newPastStates(cfg, counted, logger); err != nil {
		s.compact.stop()
		return nil, err
	}
	s.registerFollowerMetrics()
	s.host.WatchLeaseWaits(s.watchLeaseWait)
	s.forward = s.newForwarder()
	s.quotas = newDBQuotas(s.host, cfg.DataDir, s.lim)
	s.wsConns = &wsCounts{max: s.lim.MaxWebSocketsPerToken, n: map[string]int{}}
	s.sync = libsqlsync.New(libsqlsync.Options{Host: s.host, Store: counted, History: s.syncHistory,
		Dir: filepath.Join(cfg.DataDir, "embedded-sync"), WriteError: writeError, Follower: s.syncFollower,
		Observe: s.syncObserver()})
	s.handler = s.guardHTTP(s.routes())
	return s, nil
}

func newAuthenticator(cfg Config) (*auth.Authenticator, error) {
	ac := auth.Config{JWTPublicKey: cfg.JWTPublicKey, JWTMaxLifetime: time.Duration(cfg.JWTMaxLifetime), JWTAllowNoExp: cfg.JWTAllowNoExp}
	if cfg.MetricsToken != "" && len(cfg.MetricsToken) < 8 {
		return nil, fmt.Errorf("metrics_token is shorter than 8 characters: use a long random token")
	}
	if cfg.JWTPublicKeyFile != "" {
		b, err := os.ReadFile(cfg.JWTPublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("read JWT public key: %w", err)
		}
		ac.JWTPublicKey = string(b)
	}
	for i, t := range cfg.Tokens {
		acc, err := auth.ParseAccess(t.Access)
		if err != nil {
			return nil, fmt.Errorf("token #%d: %w", i+1, err)
		}
		for _, db := range t.Databases {
			if err := dbhost.ValidateName(db); err != nil {
				return nil, fmt.Errorf("token #%d: %w", i+1, err)
			}
		}
		ac.Tokens = append(ac.Tokens, auth.Token{Token: t.Token, Access: acc, Databases: t.Databases})
	}
	return auth.New(ac)
}

// IsLoopback reports whether a listen address only accepts local
// connections ("" and 0.0.0.0 do not).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Handler returns the server's HTTP handler (for tests with httptest).
func (s *Server) Handler() http.Handler { return s.handler }

// Host returns the database host.
func (s *Server) Host() *dbhost.Host { return s.host }

// Serve serves on ln until ctx ends, then shuts down gracefully: stop
// accepting, let requests in flight finish (their groups commit and ship),
// ship what is left, close every database. It returns nil after a clean
// shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.served.Store(true)
	if os.Getenv("GOGC") == "" {
		// Requests allocate a little and keep nothing: at the default 100
		// the collector took about a tenth of a saturated server's CPU.
		// Not more than 200: the heap may grow to (1 + GOGC/100) × what is
		// live, and what is live grows with the databases and their
		// replicas' objects, so a higher setting multiplies memory that
		// the server's own allocations no longer justify (upload and merge
		// buffers are reused).
		debug.SetGCPercent(200)
	}
	sqliteconn.SetSoftHeapLimit(sqliteMemory(s.cfg.Limits))
	applySQLiteLimits(s.cfg.Limits)
	handler := s.handler
	if s.cfg.Lease.Enabled {
		handler = s.forward.Track(handler)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.advertise(ln)
	ln = newCapListener(ln, s.lim.MaxConnections, s.cert != nil)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go s.watch.Run(watchCtx)
	errc := make(chan error, 1)
	if s.cert != nil {
		srv.TLSConfig = s.cert.tlsConfig()
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	s.log.Info("sluice serve listening", "addr", ln.Addr().String(), "tls", s.cert != nil, "replica", s.store.String(),
		"data", s.cfg.DataDir, "durability", s.cfg.Durability, "auth", s.auth.Required())
	var serveErr error
	select {
	case err := <-errc:
		serveErr = err
	case <-ctx.Done():
		s.log.Info("shutting down: finishing requests in flight")
	}
	// No compaction on the way out: what level 0 holds is restorable as it
	// is, and the next start compacts it.
	s.compact.stop()
	// WebSocket connections outlive requests: tell their clients to go away
	// first, so that their streams end before the databases close.
	wsCtx, wsCancel := context.WithTimeout(context.Background(), 10*time.Second)
	s.hrana.CloseWebSockets(wsCtx)
	wsCancel()
	shutCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var handoffErr error
	if s.cfg.Lease.Enabled && serveErr == nil {
		// Ship, release every lease, and keep listening a moment: requests
		// that still arrive are forwarded to the instances taking over.
		s.forward.BeginHandoff(shutCtx)
		handoffErr = s.closeHost(shutCtx)
		s.hostClosed = true
		s.log.Info("leases released; forwarding late requests to the new holders")
		s.forward.DrainHandoff(shutCtx)
	}
	s.push.hub.Close() // after the releases, which ended their streams with "released"
	s.sync.Close()     // embedded replicas' syncs waiting for the next transaction answer now
	if err := srv.Shutdown(shutCtx); err != nil {
		s.log.Warn("HTTP shutdown did not finish cleanly", "err", err)
	}
	err := errors.Join(handoffErr, s.Close(shutCtx))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errors.Join(serveErr, err)
	}
	return err
}

// Close closes Hrana streams, then every database (final upload), then the
// replica.
func (s *Server) Close(ctx context.Context) error {
	s.compact.stop()
	s.push.hub.Close()
	s.hrana.Close()
	var err error
	if !s.hostClosed {
		err = s.closeHost(ctx)
	}
	if s.past != nil {
		s.past.Close()
	}
	s.store.Close()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if s.served.Load() { // a server that never listened (a port in use) has nothing to report but its error
		s.log.Info("shutdown complete: everything committed was shipped")
	}
	return nil
}

// closeHost stops the read replicas, then closes every database (final
// uploads) and releases this instance's leases.
func (s *Server) closeHost(ctx context.Context) error {
	s.replicas.Close()
	return s.host.Close(ctx)
}

// ListenAndServe listens on cfg.Listen and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		s.Close(context.Background())
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}
