package main

import (
	"flag"
	"time"

	"github.com/sluicedb/sluice/internal/units"
	"github.com/sluicedb/sluice/server"
)

// configFlags binds serve's flags to the fields of a server.Config. A flag
// writes its field in vals, which holds the flags' own defaults (the ones
// help shows); apply copies the fields of the flags given on the command line
// over the config read from the file, so the file's values stay the defaults
// of the flags left out. A value is checked once, by the check bound with
// its flag, when it is applied.
type configFlags struct {
	fs    *flag.FlagSet
	vals  server.Config
	binds map[string]func(dst *server.Config) error
}

func newConfigFlags(fs *flag.FlagSet) *configFlags {
	return &configFlags{fs: fs, binds: map[string]func(*server.Config) error{}}
}

// field is where a flag's value lives in a config.
type field[T any] func(*server.Config) *T

// bind records that flag name sets the field at, refused by check (if any),
// and returns the field in vals for the flag to write.
func bind[T any](b *configFlags, name string, at field[T], check func(name string, v T) error) *T {
	b.binds[name] = func(dst *server.Config) error {
		v := *at(&b.vals)
		if check != nil {
			if err := check(name, v); err != nil {
				return err
			}
		}
		*at(dst) = v
		return nil
	}
	return at(&b.vals)
}

func (b *configFlags) String(name, value, usage string, at field[string], check func(string, string) error) {
	b.fs.StringVar(bind(b, name, at, check), name, value, usage)
}

func (b *configFlags) Bool(name string, value bool, usage string, at field[bool]) {
	b.fs.BoolVar(bind(b, name, at, nil), name, value, usage)
}

func (b *configFlags) Int(name string, value int, usage string, at field[int], check func(string, int) error) {
	b.fs.IntVar(bind(b, name, at, check), name, value, usage)
}

// Duration registers a time.Duration flag (cliflag.Humanize lets it read
// "7d") for a server.Duration field.
func (b *configFlags) Duration(name string, value time.Duration, usage string, at field[server.Duration], check func(string, server.Duration) error) {
	b.fs.DurationVar((*time.Duration)(bind(b, name, at, check)), name, value, usage)
}

func (b *configFlags) Size(name, usage string, at field[units.Size]) {
	b.fs.Var(bind(b, name, at, nil), name, usage)
}

// apply copies the flags given on the command line into cfg; the first
// refused value is the error.
func (b *configFlags) apply(cfg *server.Config) error {
	var err error
	b.fs.Visit(func(f *flag.Flag) {
		if set := b.binds[f.Name]; set != nil && err == nil {
			err = set(cfg)
		}
	})
	return err
}

// The checks of flag values. A flag's 0 is refused where the config file's 0
// means "the default" (YAML cannot tell a 0 from a key left out).

func positive(name string, d server.Duration) error {
	if d <= 0 {
		return usagef("serve", "-%s %s: give a positive duration", name, time.Duration(d))
	}
	return nil
}

func positiveOrZero(hint string) func(string, server.Duration) error {
	return func(name string, d server.Duration) error {
		if d < 0 {
			return usagef("serve", "-%s %s: give 0 (%s) or a positive duration", name, time.Duration(d), hint)
		}
		return nil
	}
}

func countOrDefault(name string, n int) error {
	if n < 0 {
		return usagef("serve", "-%s %d: give a positive number, or 0 for the default", name, n)
	}
	return nil
}

func syncOrAsync(name, v string) error {
	if v != "sync" && v != "async" {
		return usagef("serve", "-%s %q: use sync or async", name, v)
	}
	return nil
}
