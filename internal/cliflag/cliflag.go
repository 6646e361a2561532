// Package cliflag is the command-line grammar shared by sluice and
// sluice-bench: flags before or after the arguments, durations that read "7d"
// and sizes that read "8MiB", help on -h, and a usage error that names the
// nearest real flag.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/suggest"
	"github.com/sluicedb/sluice/internal/units"
)

// UsageError is a mistake on the command line: the program exits 2 and
// points at Cmd's help.
type UsageError struct {
	Cmd string
	Msg string
}

func (e UsageError) Error() string { return e.Msg }

// Usagef is a UsageError of command cmd.
func Usagef(cmd, format string, args ...any) error {
	return UsageError{Cmd: cmd, Msg: fmt.Sprintf(format, args...)}
}

// Parse parses flags anywhere among the arguments (`restore URL -o out.db`)
// and returns the positional ones; "--" ends the flags. With argsEndFlags the
// first positional argument does. -h prints help to stdout and returns
// flag.ErrHelp. A flag set named "sluice NAME" reports its errors as NAME's.
func Parse(fs *flag.FlagSet, args []string, argsEndFlags bool, help func(io.Writer)) ([]string, error) {
	name := strings.TrimPrefix(fs.Name(), "sluice ")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				help(os.Stdout)
				return nil, flag.ErrHelp
			}
			return nil, flagError(name, fs, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" || argsEndFlags {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// flagError turns the flag package's error into a usage error with a hint.
func flagError(cmd string, fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := suggest.Closest(name, names); s != "" {
			msg = fmt.Sprintf("unknown flag -%s (did you mean -%s?)", name, s)
		} else {
			msg = fmt.Sprintf("unknown flag -%s", name)
		}
	}
	return UsageError{Cmd: cmd, Msg: msg}
}

// IsSet reports whether flag name was given on the command line.
func IsSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// HasFlags reports whether fs defines any flag.
func HasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// PrintDefaults lists fs's flags, sorted, with their type and default.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		switch f.Value.(type) {
		case humanDuration, *units.Duration:
			typ = "duration"
		case humanSize, *units.Size:
			typ = "size"
		}
		line := "  -" + f.Name
		if typ != "" {
			line += " " + typ
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// humanDuration wraps a time.Duration flag so it reads "7d" and "90s" too.
type humanDuration struct{ inner flag.Value }

func (h humanDuration) String() string {
	if h.inner == nil {
		return ""
	}
	return units.FormatDuration(h.inner.(flag.Getter).Get().(time.Duration))
}

func (h humanDuration) Set(s string) error {
	d, err := units.ParseDuration(s)
	if err != nil {
		return err
	}
	return h.inner.Set(d.String())
}

// humanSize wraps an integer flag counting bytes so it reads "8MiB" too.
type humanSize struct{ inner flag.Value }

func (h humanSize) String() string {
	if h.inner == nil {
		return ""
	}
	return h.inner.String()
}

func (h humanSize) Set(s string) error {
	n, err := units.ParseSize(s)
	if err != nil {
		return err
	}
	return h.inner.Set(fmt.Sprint(n))
}

// Humanize gives every duration flag of fs, and every integer flag counting
// bytes (-*-bytes, -*-size), the human syntax of the units package.
func Humanize(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch v := g.Get().(type) {
		case time.Duration:
			f.Value = humanDuration{inner: f.Value}
			f.DefValue = units.FormatDuration(v)
		case int, int64:
			if strings.HasSuffix(f.Name, "-bytes") || strings.HasSuffix(f.Name, "-size") {
				f.Value = humanSize{inner: f.Value}
			}
		}
	})
}
