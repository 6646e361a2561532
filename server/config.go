package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicedb/sluice/internal/confyaml"
	"github.com/sluicedb/sluice/internal/units"
)

// Config is sluice serve's configuration: flags override the YAML file.
type Config struct {
	DataDir                    string        `yaml:"data"`
	Replica                    string        `yaml:"replica"`    // empty: DefaultReplica(DataDir)
	Listen                     string        `yaml:"addr"`       // also read as listen:
	TLSCert                    string        `yaml:"tls-cert"`   // PEM certificate (chain): serve HTTPS and WSS
	TLSKey                     string        `yaml:"tls-key"`    // its PEM private key
	Durability                 string        `yaml:"durability"` // sync (default) or async
	AllowUnauthenticatedRemote bool          `yaml:"allow-unauthenticated-remote"`
	Tokens                     []TokenConfig `yaml:"tokens"`
	JWTPublicKey               string        `yaml:"jwt-public-key"`      // PEM or base64url raw Ed25519 key
	JWTPublicKeyFile           string        `yaml:"jwt-public-key-file"` // alternative to jwt-public-key
	JWTMaxLifetime             Duration      `yaml:"jwt-max-lifetime"`    // longest exp-iat accepted, default 168h; negative: no limit
	JWTAllowNoExp              bool          `yaml:"jwt-allow-no-exp"`    // accept JWTs without exp (never expire)
	MetricsToken               string        `yaml:"metrics-token"`       // a token that may read /metrics (and nothing else)
	Limits                     Limits        `yaml:"limits"`
	Group                      Group         `yaml:"group"`
	Hrana                      Hrana         `yaml:"hrana"`
	Compaction                 Compaction    `yaml:"compaction"`
	Lease                      LeaseConfig   `yaml:"lease"`
	// IdempotencyWindow: how long an Idempotency-Key is remembered (default 24h).
	IdempotencyWindow Duration `yaml:"idempotency-window"`
	// ReplicaErrorBudget: /ready answers 503 once the replica has accepted
	// no upload or probe for this long (default 60s; probes run every quarter of it).
	ReplicaErrorBudget Duration `yaml:"replica-error-budget"`
	// StallThreshold: an upload or probe outstanding this long means the
	// store stopped answering: /ready answers 503 and sync writes are
	// refused before they run (default 0: four times the store's recent
	// 99th-percentile latency, 2s to 60s).
	StallThreshold Duration `yaml:"stall-threshold"`
	// WriteStallTimeout: how long a committed sync write waits for its
	// upload on a stalled store before it is answered COMMITTED_NOT_DURABLE
	// (default 5s).
	WriteStallTimeout Duration `yaml:"write-stall-timeout"`
	// TimeTravel bounds the past states kept for time-travel reads.
	TimeTravel TimeTravel `yaml:"time-travel"`
	// ColdOpen serves reads on a database only in the bucket before it is restored.
	ColdOpen ColdOpen `yaml:"cold-open"`
}

// TokenConfig is one static bearer token.
type TokenConfig struct {
	Token     string   `yaml:"token"`
	Access    string   `yaml:"access"`    // rw (default) or ro
	Databases []string `yaml:"databases"` // empty: every database
}

// Limits bound what one request can cost.
type Limits struct {
	MaxBodyBytes     units.Size `yaml:"max-body-bytes"`    // default 8 MiB; reads 8MiB, 512KB
	StatementTimeout Duration   `yaml:"statement-timeout"` // default 5s
	ReadConnections  int        `yaml:"read-connections"`  // per database, default 4
	MaxSessions      int        `yaml:"max-sessions"`      // read-write interactive sessions per database, default 64
	MaxReadSessions  int        `yaml:"max-read-sessions"` // read-only interactive sessions per database, default 64
	RequestTimeout   Duration   `yaml:"request-timeout"`   // all statements of one request (JSON API or Hrana), default 10s
	UploadTimeout    Duration   `yaml:"upload-timeout"`    // per upload, default 30s
	// MaxOpenDatabases caps the databases open at once; the least recently
	// used idle one is closed to open another. Default: what the descriptor
	// limit allows (about 20 descriptors each), at most 256.
	MaxOpenDatabases int `yaml:"max-open-databases"`
	// DatabaseIdleTimeout closes a database unused this long (default 1m;
	// negative: never). Reopening needs no restore.
	DatabaseIdleTimeout Duration `yaml:"database-idle-timeout"`
	// ExternalWritePoll: how often an open, idle database looks for commits
	// other processes made to its file and ships them (default 1s; negative: never).
	ExternalWritePoll Duration `yaml:"external-write-poll"`
	// MaxConcurrentUploads bounds the write-path uploads in flight across
	// every database (default 16). A database waiting for one keeps adding
	// commits to its next upload instead of sending another small PUT.
	MaxConcurrentUploads int `yaml:"max-concurrent-uploads"`
	// SQLiteMemory is what SQLite may hold across every database before
	// their page caches recycle pages instead of growing (SQLite's soft
	// heap limit; default 64 MiB, negative: none). Reads past it come from
	// the operating system's file cache.
	SQLiteMemory units.Size `yaml:"sqlite-memory"`

	// Isolation between clients (isolation.go).
	MaxValueBytes              units.Size `yaml:"max-value-bytes"`               // largest string, blob or row SQLite builds or reads, default 16 MiB
	IdleWriteTimeout           Duration   `yaml:"idle-write-timeout"`            // a write transaction idle this long while others wait is rolled back, default 250ms
	MaxPinnedDatabases         int        `yaml:"max-pinned-databases"`          // databases one token (or address) holds sessions on, default min(8, max-open-databases/2)
	PinnedSessionIdle          Duration   `yaml:"pinned-session-idle"`           // a full server closes sessions idle this long (no transaction), default 1s
	MaxConcurrentLongPipelines int        `yaml:"max-concurrent-long-pipelines"` // pipelines of more than 100 statements running at once, default half the CPUs
	MaxPipelineStatements      int        `yaml:"max-pipeline-statements"`       // statements (executes, batch steps) in one Hrana HTTP pipeline, default 10000
	// Connections, answers, bodies, databases per token (limits_http.go).
	HTTPLimits `yaml:",inline"`
}

// Group tunes group commit.
type Group struct {
	MaxRequests int `yaml:"max-requests"` // requests per write group, default 1000
	// CommitWindow: a sync write may wait up to this long after its commit
	// to share an upload with the writes that follow (default 0: upload at
	// once). Fewer PUTs for a few milliseconds of latency.
	CommitWindow Duration `yaml:"commit-window"`
	// UploadPipeline: uploads of one database in flight at once, each
	// write answered once its own and every earlier one succeeded
	// (default 8; 1: one at a time).
	UploadPipeline int `yaml:"upload-pipeline"`
}

// Hrana tunes interactive streams.
type Hrana struct {
	IdleTimeout Duration `yaml:"idle-timeout"` // default 10s
	TxTimeout   Duration `yaml:"tx-timeout"`   // default 5s
	// Quotas: open streams per token, per database and in all (defaults
	// 1000, 5000, 20000), open interactive transactions per token (16).
	MaxStreamsPerToken    int `yaml:"max-streams-per-token"`
	MaxStreamsPerDatabase int `yaml:"max-streams-per-database"`
	MaxStreams            int `yaml:"max-streams"`
	MaxSessionsPerToken   int `yaml:"max-sessions-per-token"`
	// Hrana over WebSocket: a connection idle this long is closed (default
	// 2m); streams open at once on one connection (default 128).
	WebSocketIdleTimeout    Duration `yaml:"ws-idle-timeout"`
	MaxStreamsPerConnection int      `yaml:"max-streams-per-connection"`
}

// Compaction tunes per-database compaction and retention (zero: the
// compact package's defaults).
type Compaction struct {
	SnapshotInterval Duration `yaml:"snapshot-interval"`
	Retention        Duration `yaml:"retention"`
	// Workers: compaction passes running at once, shared by every database
	// (default compact.DefaultWorkers).
	Workers  int  `yaml:"workers"`
	Disabled bool `yaml:"disabled"`
}

// DefaultReplica is the replica of a server given none: a replica directory
// inside its data directory, so that moving the data moves the replica with
// it (and serve warns that it does not survive losing the disk).
func DefaultReplica(dataDir string) string {
	p := filepath.ToSlash(filepath.Join(dataDir, "replica"))
	if !filepath.IsAbs(dataDir) && !strings.HasPrefix(p, "../") {
		p = "./" + p
	}
	return "file://" + p
}

// hasTopLevelKey reports whether the YAML document names key at its top
// level, even with no value.
func hasTopLevelKey(raw []byte, key string) bool {
	var doc map[string]any
	if yaml.Unmarshal(raw, &doc) != nil {
		return false
	}
	_, ok := doc[key]
	return ok
}

// Duration reads "5s", "1m30s", "7d" from YAML.
type Duration = units.Duration

// Defaults are the embedded defaults that `make run` starts.
func Defaults() Config {
	return Config{
		DataDir:    "./sluice-data",
		Replica:    "", // DefaultReplica(DataDir) once flags have set the data directory
		Listen:     "127.0.0.1:8080",
		Durability: "sync",
		// Leases on: two overlapping instances (every deploy of a platform
		// that starts the new revision before stopping the old) never both
		// write a database; an idle database holds no lease (server/lease.go).
		Lease: LeaseConfig{Enabled: true},
		// Reads on a database only in the bucket start at once (server/coldopen.go).
		ColdOpen: ColdOpen{Enabled: true},
	}
}

// LoadConfig reads a YAML file over the defaults, expanding $VARS and
// ${VARS} from the environment first (for tokens and credentials). Keys are
// kebab-case; snake_case is accepted too, and listen: as addr:.
func LoadConfig(path string) (Config, error) {
	return LoadConfigWith(path, confyaml.Options{})
}

// LoadConfigWith is LoadConfig with decoding options (-no-expand-env).
func LoadConfigWith(path string, opts confyaml.Options) (Config, error) {
	cfg := Defaults()
	raw, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	opts.Aliases = map[string]string{"listen": "addr"}
	// A replica or token from a variable that is not set must stop the
	// server, not leave it writing to the local default or without the token.
	opts.UnsetIsError = true
	if err := confyaml.Decode(raw, &cfg, opts); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if cfg.Replica == "" && hasTopLevelKey(raw, "replica") {
		return cfg, fmt.Errorf("config %s: replica is empty: give s3://BUCKET/PATH, gs://BUCKET/PATH, abs://CONTAINER/PATH or file:///DIR, or leave the key out for the default, <data>/replica", path)
	}
	return cfg, nil
}
