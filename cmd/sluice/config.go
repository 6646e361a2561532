package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// sidecarConfig is the YAML file of `replicate -config` and `run -config`.
// It accepts Litestream's shape (dbs[].replicas[].url) so existing files work.
type sidecarConfig struct {
	DBs []dbConfig `yaml:"dbs"`

	// Defaults for every database.
	SyncInterval     duration `yaml:"sync-interval"`
	SnapshotInterval duration `yaml:"snapshot-interval"`
	Retention        duration `yaml:"retention"`
	L0Retention      duration `yaml:"l0-retention"`
	CheckpointPages  int      `yaml:"checkpoint-pages"`
}

type dbConfig struct {
	Path         string          `yaml:"path"`
	Replica      *replicaConfig  `yaml:"replica"`
	Replicas     []replicaConfig `yaml:"replicas"`
	SyncInterval duration        `yaml:"sync-interval"`
}

type replicaConfig struct {
	URL          string   `yaml:"url"`
	SyncInterval duration `yaml:"sync-interval"`
}

// duration parses Go durations ("1s", "24h") in YAML.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q (use e.g. 1s, 5m, 24h)", n.Line, n.Value)
	}
	*d = duration(v)
	return nil
}

// dbTarget is one database to replicate, resolved from flags or a config file.
type dbTarget struct {
	Path         string
	ReplicaURL   string
	SyncInterval time.Duration
}

// loadSidecarConfig reads path, expanding $VAR and ${VAR} from the environment.
func loadSidecarConfig(path string) (*sidecarConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var cfg sidecarConfig
	dec := yaml.NewDecoder(strings.NewReader(os.ExpandEnv(string(raw))))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	if len(cfg.DBs) == 0 {
		return nil, fmt.Errorf("config %s lists no databases (dbs:)", path)
	}
	return &cfg, nil
}

// targets resolves every database of the config to a path and one replica URL.
func (c *sidecarConfig) targets() ([]dbTarget, error) {
	var out []dbTarget
	seen := map[string]bool{}
	for i, db := range c.DBs {
		if db.Path == "" {
			return nil, fmt.Errorf("dbs[%d]: path is required", i)
		}
		abs, err := filepath.Abs(db.Path)
		if err != nil {
			return nil, err
		}
		if seen[abs] {
			return nil, fmt.Errorf("dbs[%d]: %s is listed twice", i, db.Path)
		}
		seen[abs] = true
		reps := db.Replicas
		if db.Replica != nil {
			reps = append([]replicaConfig{*db.Replica}, reps...)
		}
		switch {
		case len(reps) == 0:
			return nil, fmt.Errorf("dbs[%d] (%s): no replica url", i, db.Path)
		case len(reps) > 1:
			return nil, fmt.Errorf("dbs[%d] (%s): sluice replicates each database to exactly one replica; %d given", i, db.Path, len(reps))
		case reps[0].URL == "":
			return nil, fmt.Errorf("dbs[%d] (%s): replica url is empty", i, db.Path)
		}
		interval := time.Duration(c.SyncInterval)
		if db.SyncInterval > 0 {
			interval = time.Duration(db.SyncInterval)
		}
		if reps[0].SyncInterval > 0 {
			interval = time.Duration(reps[0].SyncInterval)
		}
		out = append(out, dbTarget{Path: abs, ReplicaURL: reps[0].URL, SyncInterval: interval})
	}
	return out, nil
}
