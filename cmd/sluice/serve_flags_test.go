package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/cliflag"
	"github.com/sluicedb/sluice/internal/confyaml"
	"github.com/sluicedb/sluice/server"
)

// serveConfig is what serve runs with for a config file and a command line:
// the file over the defaults, then the flags given.
func serveConfig(t *testing.T, yaml string, args ...string) (server.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.LoadConfigWith(path, confyaml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("sluice serve", flag.ContinueOnError)
	flags := bindServeFlags(fs, server.Defaults())
	cliflag.Humanize(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg, flags.apply(&cfg)
}

// A flag given replaces its field whatever the file says; a flag left out
// leaves the file's value (not the flag's default) in place.
func TestServeFlagsOverrideTheFileOnlyWhereGiven(t *testing.T) {
	cfg, err := serveConfig(t, `
durability: async
limits:
  max-connections: 7
  max-databases: 9
  idle-write-timeout: 1s
  max-open-databases: 5
lease:
  ttl: 30s
group:
  commit-window: 3ms
`, "-max-connections", "3", "-idle-write-timeout", "2s", "-max-value-bytes", "1MiB", "-commit-window", "0",
		"-lease=false", "-listen", "127.0.0.1:9", "-max-body-size", "2MiB", "-forward-timeout", "1d")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"-max-connections", cfg.Limits.MaxConnections, 3},
		{"-idle-write-timeout", time.Duration(cfg.Limits.IdleWriteTimeout), 2 * time.Second},
		{"-max-value-bytes", int64(cfg.Limits.MaxValueBytes), int64(1 << 20)},
		{"-max-body-size", int64(cfg.Limits.MaxBodyBytes), int64(2 << 20)},
		{"-commit-window 0 over the file's 3ms", time.Duration(cfg.Group.CommitWindow), time.Duration(0)},
		{"-lease=false over the default", cfg.Lease.Enabled, false},
		{"-listen", cfg.Listen, "127.0.0.1:9"},
		{"-forward-timeout 1d", time.Duration(cfg.Lease.ForwardTimeout), 24 * time.Hour},
		{"the file's durability", cfg.Durability, "async"},
		{"the file's max-databases", cfg.Limits.MaxDatabases, 9},
		{"the file's max-open-databases", cfg.Limits.MaxOpenDatabases, 5},
		{"the file's lease ttl, not -lease-ttl's default", time.Duration(cfg.Lease.TTL), 30 * time.Second},
		{"no -follow-poll: no value", time.Duration(cfg.Lease.PollInterval), time.Duration(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

// A value out of its range is a usage error naming the flag, and the
// config keeps the file's value.
func TestServeFlagOutOfRangeIsAUsageError(t *testing.T) {
	for args, want := range map[string]string{
		"-durability maybe":          `-durability "maybe": use sync or async`,
		"-lease-ttl 0":               "-lease-ttl 0s: give a positive duration",
		"-idempotency-window -1s":    "-idempotency-window -1s: give a positive duration",
		"-stall-threshold -1s":       "-stall-threshold -1s: give 0 (derived from the store's latency) or a positive duration",
		"-commit-window -1ms":        "-commit-window -1ms: give 0 (upload at once) or a positive duration",
		"-max-concurrent-uploads -1": "-max-concurrent-uploads -1: give a positive number, or 0 for the default",
		"-replica-error-budget 0":    "-replica-error-budget 0s: give a positive duration",
		"-max-open-databases -2":     "-max-open-databases -2: give a positive number, or 0 for the default",
		"-write-stall-timeout -5s":   "-write-stall-timeout -5s: give a positive duration",
		"-follow-poll 0":             "-follow-poll 0s: give a positive duration",
		"-forward-timeout 0":         "-forward-timeout 0s: give a positive duration",
	} {
		name, value, _ := strings.Cut(args, " ")
		cfg, err := serveConfig(t, "durability: async\nlease:\n  ttl: 30s\n", name, value)
		var ue cliflag.UsageError
		if !errors.As(err, &ue) || ue.Msg != want {
			t.Errorf("%s: got %v, want the usage error %q", args, err, want)
		}
		if cfg.Durability != "async" || time.Duration(cfg.Lease.TTL) != 30*time.Second {
			t.Errorf("%s: a refused flag changed the config: durability %q, lease ttl %s", args, cfg.Durability, time.Duration(cfg.Lease.TTL))
		}
	}
}
