package server

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is sluice serve's configuration: flags override the YAML file.
type Config struct {
	DataDir                    string        `yaml:"data"`
	Replica                    string        `yaml:"replica"`
	Listen                     string        `yaml:"listen"`
	Durability                 string        `yaml:"durability"` // sync (default) or async
	AllowUnauthenticatedRemote bool          `yaml:"allow_unauthenticated_remote"`
	Tokens                     []TokenConfig `yaml:"tokens"`
	JWTPublicKey               string        `yaml:"jwt_public_key"`      // PEM or base64url raw Ed25519 key
	JWTPublicKeyFile           string        `yaml:"jwt_public_key_file"` // alternative to jwt_public_key
	JWTMaxLifetime             Duration      `yaml:"jwt_max_lifetime"`    // longest exp-iat accepted, default 168h; negative: no limit
	JWTAllowNoExp              bool          `yaml:"jwt_allow_no_exp"`    // accept JWTs without exp (never expire)
	MetricsToken               string        `yaml:"metrics_token"`       // a token that may read /metrics (and nothing else)
	Limits                     Limits        `yaml:"limits"`
	Group                      Group         `yaml:"group"`
	Hrana                      Hrana         `yaml:"hrana"`
	Compaction                 Compaction    `yaml:"compaction"`
	Lease                      LeaseConfig   `yaml:"lease"`
	// IdempotencyWindow: how long an Idempotency-Key is remembered (default 24h).
	IdempotencyWindow Duration `yaml:"idempotency_window"`
	// ReplicaErrorBudget: /ready answers 503 once the replica has accepted
	// no upload or probe for this long (default 60s; probes run every quarter of it).
	ReplicaErrorBudget Duration `yaml:"replica_error_budget"`
}

// TokenConfig is one static bearer token.
type TokenConfig struct {
	Token     string   `yaml:"token"`
	Access    string   `yaml:"access"`    // rw (default) or ro
	Databases []string `yaml:"databases"` // empty: every database
}

// Limits bound what one request can cost.
type Limits struct {
	MaxBodyBytes     int64    `yaml:"max_body_bytes"`    // default 8 MiB
	StatementTimeout Duration `yaml:"statement_timeout"` // default 5s
	ReadConnections  int      `yaml:"read_connections"`  // per database, default 4
	MaxSessions      int      `yaml:"max_sessions"`      // read-write interactive sessions per database, default 64
	MaxReadSessions  int      `yaml:"max_read_sessions"` // read-only interactive sessions per database, default 64
	RequestTimeout   Duration `yaml:"request_timeout"`   // all statements of one request (JSON API or Hrana), default 10s
	UploadTimeout    Duration `yaml:"upload_timeout"`    // per upload, default 30s
	// MaxOpenDatabases caps the databases open at once; the least recently
	// used idle one is closed to open another. Default: what the descriptor
	// limit allows (about 20 descriptors each), at most 256.
	MaxOpenDatabases int `yaml:"max_open_databases"`
	// DatabaseIdleTimeout closes a database unused this long (default 1m;
	// negative: never). Reopening needs no restore.
	DatabaseIdleTimeout Duration `yaml:"database_idle_timeout"`
	// MaxConcurrentUploads bounds the write-path uploads in flight across
	// every database (default 16). A database waiting for one keeps adding
	// commits to its next upload instead of sending another small PUT.
	MaxConcurrentUploads int `yaml:"max_concurrent_uploads"`
}

// Group tunes group commit.
type Group struct {
	MaxRequests int `yaml:"max_requests"` // requests per write group, default 1000
	// CommitWindow: a sync write may wait up to this long after its commit
	// to share an upload with the writes that follow (default 0: upload at
	// once). Fewer PUTs for a few milliseconds of latency.
	CommitWindow Duration `yaml:"commit_window"`
}

// Hrana tunes interactive streams.
type Hrana struct {
	IdleTimeout Duration `yaml:"idle_timeout"` // default 10s
	TxTimeout   Duration `yaml:"tx_timeout"`   // default 5s
	// Quotas: open streams per token, per database and in all (defaults
	// 1000, 5000, 20000), open interactive transactions per token (16).
	MaxStreamsPerToken    int `yaml:"max_streams_per_token"`
	MaxStreamsPerDatabase int `yaml:"max_streams_per_database"`
	MaxStreams            int `yaml:"max_streams"`
	MaxSessionsPerToken   int `yaml:"max_sessions_per_token"`
}

// Compaction tunes per-database compaction and retention (zero: the
// compact package's defaults).
type Compaction struct {
	SnapshotInterval Duration `yaml:"snapshot_interval"`
	Retention        Duration `yaml:"retention"`
	Disabled         bool     `yaml:"disabled"`
}

// Duration reads "5s", "1m30s" from YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (use e.g. 5s, 1m): %w", n.Line, n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// Defaults are the embedded defaults that `make run` starts.
func Defaults() Config {
	return Config{
		DataDir:    "./sluice-data",
		Replica:    "file://./sluice-data/replica",
		Listen:     "127.0.0.1:8080",
		Durability: "sync",
	}
}

// LoadConfig reads a YAML file over the defaults, expanding $VARS and
// ${VARS} from the environment first (for tokens and credentials).
func LoadConfig(path string) (Config, error) {
	cfg := Defaults()
	raw, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(os.ExpandEnv(string(raw)))))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && err.Error() != "EOF" {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}
