package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/inspect"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

func init() {
	register(command{
		name:    "ltx",
		summary: "list a replica's LTX files: level, TXID range, size, upload time",
		usage: `sluice ltx [flags] REPLICA_URL
       sluice ltx [flags] DB_PATH          (finds DB_PATH's replica in -config, $LITESTREAM_CONFIG or /etc/litestream.yml)

Lists the LTX files of every level (Litestream's ltx command lists level 0 unless
given -level; sluice lists all, since compaction empties level 0 quickly).
'sluice info' summarizes the same replica and lists its restore points.`,
		setup: setupLTX,
	})
}

// replicaSource is how the inspection commands name a replica: a URL, or a
// database path listed in a config.
type replicaSource struct {
	configPath  string
	noExpandEnv bool
}

func (r *replicaSource) flags(fs *flag.FlagSet) {
	fs.StringVar(&r.configPath, "config", "", "config file: inspect DB_PATH's configured replica")
	fs.BoolVar(&r.noExpandEnv, "no-expand-env", false, "do not expand $VAR and ${VAR} in the config")
}

// open resolves arg to a replica URL and opens it.
func (r *replicaSource) open(ctx context.Context, cmd string, args []string) (replica.Store, error) {
	applyLitestreamEnv()
	if len(args) != 1 {
		return nil, usagef(cmd, "want exactly one REPLICA_URL or DB_PATH, got %d arguments", len(args))
	}
	url, configPath := args[0], r.configPath
	if configPath == "" && !strings.Contains(url, "://") {
		if p := defaultConfigPath(); p != "" {
			if _, err := configTarget(p, url, r.noExpandEnv); err == nil {
				configPath = p
			}
		}
	}
	if configPath != "" {
		t, err := configTarget(configPath, url, r.noExpandEnv)
		if err != nil {
			return nil, err
		}
		url = t.ReplicaURL
	} else if !strings.Contains(url, "://") {
		// A plain path is a file replica only if it looks like one: a
		// database file given by mistake must not read as an empty replica.
		if st, err := os.Stat(url); err != nil {
			return nil, fmt.Errorf("%s: %w", url, err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("%s is a file, not a replica directory; give its replica URL, or -config listing it", url)
		}
	}
	if err := replicaurl.Check(url); err != nil {
		return nil, err
	}
	return replicaurl.Open(ctx, url)
}

func setupLTX(fs *flag.FlagSet) runFunc {
	var src replicaSource
	src.flags(fs)
	level := fs.String("level", "all", "level to list: 0-9 or all")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	return func(ctx context.Context, args []string) error {
		lvl := inspect.AllLevels
		if *level != "all" {
			n, err := strconv.Atoi(*level)
			if err != nil || n < 0 || n > replica.MaxLevel {
				return usagef("ltx", "-level %q: want 0-%d or all", *level, replica.MaxLevel)
			}
			lvl = n
		}
		store, err := src.open(ctx, "ltx", args)
		if err != nil {
			return err
		}
		defer store.Close()
		files, err := inspect.Files(ctx, store, lvl)
		if err != nil {
			return err
		}
		if len(files) == 0 && lvl == inspect.AllLevels {
			return emptyReplicaError(store)
		}
		if *asJSON {
			return writeJSONOut(os.Stdout, files)
		}
		if len(files) == 0 {
			fmt.Fprintf(os.Stderr, "%s holds no LTX file at %s\n", store, levelName(lvl))
			return nil
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintln(w, "level\tmin_txid\tmax_txid\tsize\tcreated")
		for _, f := range files {
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\n", f.Level, f.MinTXID, f.MaxTXID, f.Size, f.Created.Format(time.RFC3339))
		}
		return w.Flush()
	}
}

func levelName(l int) string {
	if l == inspect.AllLevels {
		return "any level"
	}
	return "level " + strconv.Itoa(l)
}

// writeJSONOut prints v indented, with a newline (nil slices as []).
func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if files, ok := v.([]inspect.File); ok && files == nil {
		v = []inspect.File{}
	}
	return enc.Encode(v)
}
