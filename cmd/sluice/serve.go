package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/confyaml"
	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server"
)

func init() {
	register(command{
		name:    "serve",
		summary: "serve many SQLite databases over HTTP (Hrana + JSON), every write durable in the bucket",
		usage: `sluice serve [flags]

Serves the databases <data>/<name>.db over HTTP, each replicated to <replica>/<name>/.
With -durability sync (the default) a write is answered only once the bucket holds it.
SIGTERM/SIGINT: stop accepting, finish and ship what is in flight, exit 0.
The replica is checked (listed and written) before listening; /health answers while the
process runs, /ready only while the replica takes writes. Without -addr (or addr: in the
config), $PORT is honoured as on Cloud Run: the server listens on :$PORT.
Listening beyond loopback with no token or JWT key configured, serve generates a
token at first start, prints it once and keeps it in <data>/.sluice-token for later
starts (-allow-unauthenticated-remote serves without one).
Flags override the config file.

` + exitCodes,
		setup:       setupServe,
		longRunning: true,
	})
}

// tokenFlags collects repeated -token TOKEN[:ro|rw[:db1,db2]] flags.
type tokenFlags []server.TokenConfig

func (t *tokenFlags) String() string { return fmt.Sprintf("%d tokens", len(*t)) }

func (t *tokenFlags) Set(v string) error {
	parts := strings.SplitN(v, ":", 3)
	tc := server.TokenConfig{Token: parts[0], Access: "rw"}
	if len(parts) > 1 {
		tc.Access = parts[1]
	}
	if len(parts) > 2 && parts[2] != "" {
		tc.Databases = strings.Split(parts[2], ",")
	}
	*t = append(*t, tc)
	return nil
}

func setupServe(fs *flag.FlagSet) runFunc {
	def := server.Defaults()
	configPath := fs.String("config", "", "YAML config file (tokens, limits, group and Hrana tuning; $VARS are expanded)")
	noExpandEnv := fs.Bool("no-expand-env", false, "do not expand $VAR and ${VAR} in the config")
	flags := bindServeFlags(fs, def)
	var tokens tokenFlags
	fs.Var(&tokens, "token", "bearer token TOKEN[:ro|rw[:db1,db2]] (repeatable)")
	pprofAddr := fs.String("pprof", "", "serve Go's profiler (net/http/pprof) on this address, e.g. 127.0.0.1:6060 (off by default)")
	verbose := fs.Bool("v", false, "debug logging")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usagef("serve", "unexpected arguments: %q (serve takes only flags)", args)
		}
		cfg := def
		if *configPath != "" {
			var err error
			if cfg, err = server.LoadConfigWith(*configPath, confyaml.Options{NoExpandEnv: *noExpandEnv}); err != nil {
				return err
			}
		}
		// Cloud Run (and others) say which port to listen on in $PORT.
		if port := os.Getenv("PORT"); port != "" && !flagSet(fs, "addr") && !flagSet(fs, "listen") && cfg.Listen == def.Listen {
			cfg.Listen = ":" + port
		}
		if err := flags.apply(&cfg); err != nil {
			return err
		}
		if err := checkServeFlags(fs, cfg); err != nil {
			return err
		}
		if cfg.Replica == "" && !flagSet(fs, "replica") {
			cfg.Replica = server.DefaultReplica(cfg.DataDir)
		}
		if cfg.ReplicaErrorBudget <= 0 {
			cfg.ReplicaErrorBudget = flags.vals.ReplicaErrorBudget // the flag's default
		}
		logger := newLogger(*verbose)
		if err := checkReplicaURL(cfg.Replica, cfg.DataDir, logger); err != nil {
			return err
		}
		if err := checkDataDir(cfg.DataDir); err != nil {
			return err
		}
		if err := preflightServe(ctx, cfg.Replica, time.Duration(cfg.ReplicaErrorBudget), cfg.Lease.Follow, logger); err != nil {
			return err
		}
		if *pprofAddr != "" {
			if err := servePprof(*pprofAddr, logger); err != nil {
				return err
			}
		}
		cfg.Tokens = append(cfg.Tokens, tokens...)
		if err := ensureRemoteToken(&cfg, logger); err != nil {
			return err
		}
		srv, err := server.New(ctx, cfg, logger, buildVersion())
		if err != nil {
			return err
		}
		return srv.ListenAndServe(ctx)
	}
}

// bindServeFlags binds the flags of serve that set a config field.
func bindServeFlags(fs *flag.FlagSet, def server.Config) *configFlags {
	flags := newConfigFlags(fs)
	flags.String("data", def.DataDir, "directory holding the databases", func(c *server.Config) *string { return &c.DataDir }, nil)
	flags.String("replica", def.Replica, "replica URL (s3://BUCKET/PATH, gs://, abs://, file:///DIR) (default file://<data>/replica, which does not survive losing the disk)", func(c *server.Config) *string { return &c.Replica }, nil)
	listen := func(c *server.Config) *string { return &c.Listen }
	flags.String("addr", def.Listen, "HTTP listen address (default: :$PORT when $PORT is set)", listen, nil)
	flags.String("listen", def.Listen, "same as -addr", listen, nil)
	flags.String("tls-cert", "", "PEM certificate (chain) file: serve HTTPS and WSS so libsql://, https:// and wss:// URLs work; reloaded when it changes", func(c *server.Config) *string { return &c.TLSCert }, nil)
	flags.String("tls-key", "", "PEM private key file of -tls-cert", func(c *server.Config) *string { return &c.TLSKey }, nil)
	flags.String("durability", def.Durability, "sync: answer writes after the upload; async: after the local commit", func(c *server.Config) *string { return &c.Durability }, syncOrAsync)
	flags.Bool("allow-unauthenticated-remote", false, "serve a non-loopback listen address without any token (default: a generated one)", func(c *server.Config) *bool { return &c.AllowUnauthenticatedRemote })
	flags.Bool("lease", true, "write a database only while holding its lease in the bucket (taken on first use, released when idle): overlapping instances hand over to the newer one and forward writes to the holder; -lease=false for a single instance that must never wait for one", func(c *server.Config) *bool { return &c.Lease.Enabled })
	flags.Duration("lease-ttl", 10*time.Second, "lease time-to-live (renewed every third of it)", func(c *server.Config) *server.Duration { return &c.Lease.TTL }, positive)
	flags.String("advertise", "", "URL other instances forward requests to (default http://<listen address>)", func(c *server.Config) *string { return &c.Lease.Advertise }, nil)
	flags.Bool("follow", false, "read replica: never take a lease; serve reads from local followers of the bucket, forward writes to the lease holder", func(c *server.Config) *bool { return &c.Lease.Follow })
	flags.Duration("follow-poll", 200*time.Millisecond, "how often a follower fetches the next transaction file", func(c *server.Config) *server.Duration { return &c.Lease.PollInterval }, positive)
	flags.Bool("follow-poll-only", false, "followers and instances waiting for a lease only poll the bucket; by default they also subscribe to the lease holder's stream of shipped transactions and its release (for instances that cannot reach each other, where it only fails and retries)", func(c *server.Config) *bool { return &c.Lease.PollOnly })
	flags.Duration("idempotency-window", 24*time.Hour, "how long a write's Idempotency-Key is remembered (a retry within it replays the first answer)", func(c *server.Config) *server.Duration { return &c.IdempotencyWindow }, positive)
	flags.Duration("replica-error-budget", 60*time.Second, "/ready answers 503 after this long without an upload or probe accepted by the replica (idle: one HEAD request every quarter of it)", func(c *server.Config) *server.Duration { return &c.ReplicaErrorBudget }, positive)
	flags.Duration("stall-threshold", 0, "an upload or probe outstanding this long means the store stopped answering: /ready answers 503 and sync writes are refused (503, Retry-After, nothing committed) until it answers (0: four times the store's recent 99th-percentile latency, 2s to 60s)", func(c *server.Config) *server.Duration { return &c.StallThreshold }, positiveOrZero("derived from the store's latency"))
	flags.Duration("write-stall-timeout", 5*time.Second, "a sync write that committed waits this long for its upload on a stalled store, then is answered COMMITTED_NOT_DURABLE with its bookmark (it ships when the store answers)", func(c *server.Config) *server.Duration { return &c.WriteStallTimeout }, positive)
	flags.Duration("forward-timeout", 10*time.Second, "with -lease or -follow: a request for a database another instance writes is answered within this long, end to end (waiting for a writer, and the writer's answer: 504 if it does not answer)", func(c *server.Config) *server.Duration { return &c.Lease.ForwardTimeout }, positive)
	flags.Int("max-open-databases", 0, "databases open at once; the least recently used idle one is closed to open another (0: derived from the descriptor limit, at most 256)", func(c *server.Config) *int { return &c.Limits.MaxOpenDatabases }, countOrDefault)
	flags.Duration("database-idle-timeout", time.Minute, "close a database unused this long (reopened on demand without a restore; negative: never)", func(c *server.Config) *server.Duration { return &c.Limits.DatabaseIdleTimeout }, nil)
	flags.Size("max-body-size", "largest request body (e.g. 8MiB; default 8MiB)", func(c *server.Config) *units.Size { return &c.Limits.MaxBodyBytes })
	flags.Duration("commit-window", 0, "a sync write may wait up to this long after its commit to share an upload (e.g. 5ms: fewer PUTs, a little more latency; 0: upload at once)", func(c *server.Config) *server.Duration { return &c.Group.CommitWindow }, positiveOrZero("upload at once"))
	flags.Int("upload-pipeline", 0, "uploads of one database in flight at once; each write is answered once its own upload and every earlier one succeeded (0: the default, 8; 1: one at a time)", func(c *server.Config) *int { return &c.Group.UploadPipeline }, countOrDefault)
	flags.Int("max-concurrent-uploads", 0, "uploads in flight across every database; a database waiting for one keeps growing its next upload (0: the default, 16)", func(c *server.Config) *int { return &c.Limits.MaxConcurrentUploads }, countOrDefault)
	serveLimitFlags(flags)
	isolationFlags(flags)
	return flags
}

// checkServeFlags refuses, as usage errors, flag values that contradict each
// other and listen or advertise addresses that cannot work. Each flag's own
// range is checked where it is bound (configFlags).
func checkServeFlags(fs *flag.FlagSet, cfg server.Config) error {
	if flagSet(fs, "addr") && flagSet(fs, "listen") {
		return usagef("serve", "-addr and -listen are the same flag: give one")
	}
	if _, port, err := net.SplitHostPort(cfg.Listen); err != nil {
		return usagef("serve", "-addr %q: want HOST:PORT or :PORT (%v)", cfg.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return usagef("serve", "-addr %q: the port must be a number from 0 to 65535", cfg.Listen)
	}
	if a := cfg.Lease.Advertise; a != "" {
		if u, err := url.Parse(a); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("serve", "-advertise %q: want the URL other instances reach this one at, e.g. http://10.0.0.5:8080", a)
		}
	}
	if cfg.Lease.Follow && flagSet(fs, "lease") && cfg.Lease.Enabled {
		return usagef("serve", "-follow and -lease exclude each other: a read replica never takes a lease")
	}
	return nil
}
