package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicedb/sluice/internal/confyaml"
	"github.com/sluicedb/sluice/internal/units"
)

// sidecarConfig is the YAML file of `replicate`, `run` and `restore -config`.
// It is Litestream 0.5's file as it is (and 0.3's replica keys): every key of
// Litestream's reference is accepted; the ones sluice has no use for are
// reported in one line each (litestream_keys.go) instead of refused.
type sidecarConfig struct {
	replicaSettings `yaml:",inline"` // defaults for every replica

	DBs []dbConfig `yaml:"dbs"`

	Addr     string         `yaml:"addr"` // /health, /ready, /metrics
	Exec     string         `yaml:"exec"` // the application to run, as `sluice run` does
	Logging  loggingConfig  `yaml:"logging"`
	Snapshot snapshotConfig `yaml:"snapshot"`
	// Retention is Litestream 0.5's {enabled: bool}, or a duration (sluice,
	// Litestream 0.3): keep what restores any point in this window.
	Retention   retentionConfig `yaml:"retention"`
	L0Retention units.Duration  `yaml:"l0-retention"`
	// CheckpointPages is sluice's own.
	CheckpointPages int `yaml:"checkpoint-pages"`

	// Accepted and reported as not applying to sluice.
	MCPAddr                  string           `yaml:"mcp-addr"`
	Levels                   []intervalConfig `yaml:"levels"`
	Validation               intervalConfig   `yaml:"validation"`
	L0RetentionCheckInterval units.Duration   `yaml:"l0-retention-check-interval"`
	VerifyCompaction         bool             `yaml:"verify-compaction"`
	HeartbeatURL             string           `yaml:"heartbeat-url"`
	HeartbeatInterval        units.Duration   `yaml:"heartbeat-interval"`
	Socket                   socketConfig     `yaml:"socket"`
	ShutdownSyncTimeout      units.Duration   `yaml:"shutdown-sync-timeout"`
	ShutdownSyncInterval     units.Duration   `yaml:"shutdown-sync-interval"`
}

// replicaSettings are the keys allowed both globally and per replica.
type replicaSettings struct {
	SyncInterval     units.Duration `yaml:"sync-interval"`
	SnapshotInterval units.Duration `yaml:"snapshot-interval"`

	AccessKeyID     string `yaml:"access-key-id"`
	SecretAccessKey string `yaml:"secret-access-key"`
	Region          string `yaml:"region"`
	Bucket          string `yaml:"bucket"`
	Endpoint        string `yaml:"endpoint"`
	ForcePathStyle  *bool  `yaml:"force-path-style"`
	SkipVerify      bool   `yaml:"skip-verify"`
	AccountName     string `yaml:"account-name"`
	AccountKey      string `yaml:"account-key"`

	// Accepted and reported as not applying to sluice.
	ValidationInterval   units.Duration `yaml:"validation-interval"`
	MaxSyncLTXFiles      *int           `yaml:"max-sync-ltx-files"`
	AutoRecover          *bool          `yaml:"auto-recover"`
	SignPayload          *bool          `yaml:"sign-payload"`
	RequireContentMD5    *bool          `yaml:"require-content-md5"`
	StorageClass         string         `yaml:"storage-class"`
	PartSize             units.Size     `yaml:"part-size"`
	Concurrency          *int           `yaml:"concurrency"`
	SSECustomerAlgorithm string         `yaml:"sse-customer-algorithm"`
	SSECustomerKey       string         `yaml:"sse-customer-key"`
	SSECustomerKeyPath   string         `yaml:"sse-customer-key-path"`
	SSEKMSKeyID          string         `yaml:"sse-kms-key-id"`
	SASToken             string         `yaml:"sas-token"`
	Host                 string         `yaml:"host"`
	User                 string         `yaml:"user"`
	Password             string         `yaml:"password"`
	KeyPath              string         `yaml:"key-path"`
	ConcurrentWrites     *bool          `yaml:"concurrent-writes"`
	HostKey              string         `yaml:"host-key"`
	WebDAVURL            string         `yaml:"webdav-url"`
	WebDAVUsername       string         `yaml:"webdav-username"`
	WebDAVPassword       string         `yaml:"webdav-password"`
	JWT                  string         `yaml:"jwt"`
	Seed                 string         `yaml:"seed"`
	Creds                string         `yaml:"creds"`
	NKey                 string         `yaml:"nkey"`
	Username             string         `yaml:"username"`
	Token                string         `yaml:"token"`
	TLS                  *bool          `yaml:"tls"`
	RootCAs              []string       `yaml:"root-cas"`
	ClientCert           string         `yaml:"client-cert"`
	ClientKey            string         `yaml:"client-key"`
	MaxReconnects        *int           `yaml:"max-reconnects"`
	ReconnectWait        units.Duration `yaml:"reconnect-wait"`
	Timeout              units.Duration `yaml:"timeout"`
	Age                  ageConfig      `yaml:"age"`
}

type ageConfig struct {
	Identities []string `yaml:"identities"`
	Recipients []string `yaml:"recipients"`
}

type loggingConfig struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Type   string `yaml:"type"`   // text or json
	Stderr *bool  `yaml:"stderr"` // false: stdout, as Litestream defaults to
	Source bool   `yaml:"source"`
}

type intervalConfig struct {
	Interval units.Duration `yaml:"interval"`
}

type socketConfig struct {
	Enabled     bool   `yaml:"enabled"`
	Path        string `yaml:"path"`
	Permissions uint32 `yaml:"permissions"`
}

type snapshotConfig struct {
	Interval  units.Duration `yaml:"interval"`
	Retention units.Duration `yaml:"retention"`
}

// retentionConfig reads `retention: 24h` or `retention: {enabled: false}`.
type retentionConfig struct {
	Window  units.Duration
	Enabled *bool
}

func (r *retentionConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return r.Window.UnmarshalYAML(n)
	}
	var m struct {
		Enabled *bool `yaml:"enabled"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	r.Enabled = m.Enabled
	return nil
}

type dbConfig struct {
	Path                 string          `yaml:"path"`
	Dir                  string          `yaml:"dir"`
	Pattern              string          `yaml:"pattern"`
	Recursive            bool            `yaml:"recursive"`
	Watch                bool            `yaml:"watch"`
	Replica              *replicaConfig  `yaml:"replica"`
	Replicas             []replicaConfig `yaml:"replicas"`
	SyncInterval         units.Duration  `yaml:"sync-interval"`
	Snapshot             snapshotConfig  `yaml:"snapshot"`
	RestoreIfDBNotExists bool            `yaml:"restore-if-db-not-exists"`

	// Accepted and reported as not applying to sluice.
	MetaPath           string         `yaml:"meta-path"`
	MetaDir            string         `yaml:"meta-dir"`
	MonitorInterval    units.Duration `yaml:"monitor-interval"`
	CheckpointInterval units.Duration `yaml:"checkpoint-interval"`
	BusyTimeout        units.Duration `yaml:"busy-timeout"`
	MinCheckpointPageN *int           `yaml:"min-checkpoint-page-count"`
	MaxCheckpointPageN *int           `yaml:"max-checkpoint-page-count"`
	TruncatePageN      *int           `yaml:"truncate-page-n"`
	MaxSyncWALBytes    units.Size     `yaml:"max-sync-wal-bytes"`
}

type replicaConfig struct {
	replicaSettings `yaml:",inline"`

	Type                   string          `yaml:"type"` // file (default), s3, gs/gcs, abs; sftp, webdav, nats, oss are not supported
	Name                   string          `yaml:"name"`
	Path                   string          `yaml:"path"`
	URL                    string          `yaml:"url"`
	Retention              retentionConfig `yaml:"retention"`
	RetentionCheckInterval units.Duration  `yaml:"retention-check-interval"`
}

// compaction returns the snapshot interval and retention window: global
// settings, overridden by per-database snapshot: blocks and per-replica
// retention and snapshot-interval (Litestream 0.3). sluice compacts every
// database alike, so when they differ the longest retention and the shortest
// snapshot interval win, which keeps at least what each asked for.
func (c *sidecarConfig) compaction(notice func(string)) (snapshotInterval, retention time.Duration) {
	snapshotInterval = time.Duration(c.SnapshotInterval)
	if c.Snapshot.Interval > 0 {
		snapshotInterval = time.Duration(c.Snapshot.Interval)
	}
	retention = time.Duration(c.Retention.Window)
	if c.Snapshot.Retention > 0 {
		retention = time.Duration(c.Snapshot.Retention)
	}
	var snaps, rets []time.Duration
	for _, db := range c.DBs {
		snaps = append(snaps, time.Duration(db.Snapshot.Interval))
		rets = append(rets, time.Duration(db.Snapshot.Retention))
		reps := db.Replicas
		if db.Replica != nil {
			reps = append(reps, *db.Replica)
		}
		for _, r := range reps {
			snaps = append(snaps, time.Duration(r.SnapshotInterval))
			rets = append(rets, time.Duration(r.Retention.Window))
		}
	}
	pick := func(global time.Duration, vals []time.Duration, better func(a, b time.Duration) bool, what string) time.Duration {
		out, n, differ := global, 0, false
		if global > 0 {
			n = 1
		}
		for _, v := range vals {
			if v <= 0 {
				continue
			}
			if n > 0 && v != out {
				differ = true
			}
			if n == 0 || better(v, out) {
				out = v
			}
			n++
		}
		if differ {
			notice(fmt.Sprintf("the config asks for several %s values; sluice compacts every database alike and uses %s", what, units.FormatDuration(out)))
		}
		return out
	}
	snapshotInterval = pick(snapshotInterval, snaps, func(a, b time.Duration) bool { return a < b }, "snapshot interval")
	retention = pick(retention, rets, func(a, b time.Duration) bool { return a > b }, "retention")
	return snapshotInterval, retention
}

// dbTarget is one database to replicate, resolved from flags or a config file.
type dbTarget struct {
	Path         string
	ReplicaURL   string
	SyncInterval time.Duration
	// RestoreIfMissing restores the database before replicating when the file is absent.
	RestoreIfMissing bool
}

// loadSidecarConfig reads path; $VAR and ${VAR} are expanded unless noExpandEnv.
func loadSidecarConfig(path string, noExpandEnv bool) (*sidecarConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var cfg sidecarConfig
	if err := confyaml.Decode(raw, &cfg, confyaml.Options{NoExpandEnv: noExpandEnv}); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if len(cfg.DBs) == 0 {
		return nil, fmt.Errorf("config %s lists no databases (dbs:)", path)
	}
	return &cfg, nil
}

// defaultConfigPath is where Litestream looks when no -config is given:
// $LITESTREAM_CONFIG, else /etc/litestream.yml if it exists.
func defaultConfigPath() string {
	if v := os.Getenv("LITESTREAM_CONFIG"); v != "" {
		return v
	}
	if _, err := os.Stat("/etc/litestream.yml"); err == nil {
		return "/etc/litestream.yml"
	}
	return ""
}

// expandHome turns a leading ~ into the home directory, as Litestream does for db paths.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~")), nil
}

// targets resolves every database of the config to a path and one replica
// URL; notice reports what of the config does not apply.
func (c *sidecarConfig) targets(notice func(string)) ([]dbTarget, error) {
	var out []dbTarget
	seen := map[string]bool{}
	replicaOf := map[string]string{} // replica URL -> the database that replicates there
	for i, db := range c.DBs {
		where := fmt.Sprintf("dbs[%d]", i)
		reps := db.Replicas
		if db.Replica != nil {
			reps = append([]replicaConfig{*db.Replica}, reps...)
		}
		if len(reps) == 0 {
			return nil, fmt.Errorf("%s (%s): no replica: add replica: {url: s3://BUCKET/PATH}", where, db.Path)
		}
		repURL, repIdx, err := c.pickReplica(where, reps, notice)
		if err != nil {
			return nil, err
		}
		interval := time.Duration(c.SyncInterval)
		if db.SyncInterval > 0 {
			interval = time.Duration(db.SyncInterval)
		}
		if reps[repIdx].SyncInterval > 0 {
			interval = time.Duration(reps[repIdx].SyncInterval)
		}
		paths, err := db.paths(where, notice)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if seen[p.abs] {
				return nil, fmt.Errorf("%s: %s is listed twice", where, p.abs)
			}
			seen[p.abs] = true
			u := repURL
			if p.rel != "" { // a database found under dir: gets its own prefix
				u, err = joinURLPath(repURL, p.rel)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
			}
			if other, ok := replicaOf[u]; ok {
				// Two histories in one place: whichever ships first fences the other.
				return nil, fmt.Errorf("%s: %s and %s have the same replica %s: give each database its own path", where, other, p.abs, u)
			}
			replicaOf[u] = p.abs
			out = append(out, dbTarget{Path: p.abs, ReplicaURL: u, SyncInterval: interval, RestoreIfMissing: db.RestoreIfDBNotExists})
		}
	}
	return out, nil
}

type dbPath struct{ abs, rel string }

// paths is the database's path, or with dir: the databases found under it
// now (Litestream's directory mode; new files appear at the next start).
func (db dbConfig) paths(where string, notice func(string)) ([]dbPath, error) {
	switch {
	case db.Path != "" && db.Dir != "":
		return nil, fmt.Errorf("%s: give path or dir, not both", where)
	case db.Path != "":
		p, err := expandHome(db.Path)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(p)
		return []dbPath{{abs: abs}}, err
	case db.Dir == "":
		return nil, fmt.Errorf("%s: path is required", where)
	}
	dir, err := expandHome(db.Dir)
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	pattern := db.Pattern
	if pattern == "" {
		pattern = "*.db"
	}
	if db.Watch {
		notice(fmt.Sprintf("%s: watch: databases created under %s after start are replicated from the next start", where, db.Dir))
	}
	var found []dbPath
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && !db.Recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if ok, _ := filepath.Match(pattern, d.Name()); ok {
			rel, _ := filepath.Rel(dir, p)
			found = append(found, dbPath{abs: p, rel: filepath.ToSlash(rel)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: dir %s: %w", where, db.Dir, err)
	}
	if len(found) == 0 {
		notice(fmt.Sprintf("%s: no database matches %s under %s yet", where, pattern, db.Dir))
	}
	return found, nil
}
