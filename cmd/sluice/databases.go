package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
)

func init() {
	register(command{
		name:    "databases",
		summary: "list the databases of a config with their replicas",
		usage: `sluice databases [flags]

Lists each database of the config (-config, else $LITESTREAM_CONFIG or
/etc/litestream.yml) with the replica sluice replicates it to.`,
		setup: setupDatabases,
	})
}

type databaseEntry struct {
	Path    string `json:"path"`
	Replica string `json:"replica"` // the replica's type, as Litestream prints it
	URL     string `json:"url"`
}

func setupDatabases(fs *flag.FlagSet) runFunc {
	configPath := fs.String("config", "", "config file (default $LITESTREAM_CONFIG, else /etc/litestream.yml)")
	noExpandEnv := fs.Bool("no-expand-env", false, "do not expand $VAR and ${VAR} in the config")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usagef("databases", "takes no arguments, got %q", args)
		}
		path := *configPath
		if path == "" {
			if path = defaultConfigPath(); path == "" {
				return usagef("databases", "no config: give -config FILE (or set $LITESTREAM_CONFIG, or create /etc/litestream.yml)")
			}
		}
		cfg, err := loadSidecarConfig(path, *noExpandEnv)
		if err != nil {
			return err
		}
		targets, err := cfg.targets(func(string) {})
		if err != nil {
			return err
		}
		entries := make([]databaseEntry, 0, len(targets))
		for _, t := range targets {
			entries = append(entries, databaseEntry{Path: t.Path, Replica: replicaType(t.ReplicaURL), URL: t.ReplicaURL})
		}
		if *asJSON {
			return writeJSONOut(os.Stdout, entries)
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(w, "path\treplica\turl")
		for _, e := range entries {
			fmt.Fprintf(w, "%s\t%s\t%s\n", e.Path, e.Replica, e.URL)
		}
		return w.Flush()
	}
}

// replicaType names a replica URL's kind the way Litestream's config does.
func replicaType(raw string) string {
	if !strings.Contains(raw, "://") {
		return "file"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "unknown"
	}
	switch u.Scheme {
	case "gs", "gcs":
		return "gs"
	case "abs", "az":
		return "abs"
	}
	return u.Scheme
}
