package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/suggest"
	"github.com/sluicedb/sluice/internal/units"
)

// runFunc runs a command with its positional arguments, once its flags are parsed.
type runFunc func(ctx context.Context, args []string) error

// command is one entry of the registry: `sluice help`, completion, flag
// parsing and dispatch all read it, so a new command is one register call.
type command struct {
	name    string
	summary string // one line in `sluice help`
	// usage is the synopsis and description printed by `sluice help NAME`
	// above the flags, e.g. "sluice restore [flags] REPLICA_URL\n\nRebuilds ...".
	usage string
	// setup defines the command's flags on fs and returns its run function.
	setup func(fs *flag.FlagSet) runFunc
	// longRunning commands also get -log-format.
	longRunning bool
	// argsEndFlags: the first positional argument ends flag parsing, because
	// what follows belongs to someone else (run's COMMAND, bench's SUBCOMMAND).
	argsEndFlags bool
}

// commands is filled by each command file's init, in the order of `sluice help`.
var commands []command

func register(c command) { commands = append(commands, c) }

// helpOrder puts the everyday commands first in `sluice help`; the others
// follow in name order.
var helpOrder = []string{"replicate", "run", "restore", "serve"}

func sortedCommands() []command {
	rank := func(name string) int {
		for i, n := range helpOrder {
			if n == name {
				return i
			}
		}
		return len(helpOrder)
	}
	out := append([]command(nil), commands...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank(out[i].name), rank(out[j].name)
		if ri != rj {
			return ri < rj
		}
		return out[i].name < out[j].name
	})
	return out
}

func findCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// usageError is a mistake on the command line: exit 2 with a hint.
type usageError struct {
	cmd string
	msg string
}

func (e usageError) Error() string { return e.msg }

func usagef(cmd, format string, args ...any) error {
	return usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// exitError carries a specific exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// logFormat is -log-format: text or json ("" when not given: text, or the config's logging type).
var logFormat string

func logFormatFlag(fs *flag.FlagSet) {
	fs.Func("log-format", "log format: text or json (default text)", func(v string) error {
		if v != "text" && v != "json" {
			return fmt.Errorf("want text or json, not %q", v)
		}
		logFormat = v
		return nil
	})
}

// newFlagSet is a command's flag set: errors are returned, not printed.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// prepare builds c's flag set and run function.
func (c command) prepare() (*flag.FlagSet, runFunc) {
	fs := newFlagSet(c.name)
	run := c.setup(fs)
	if c.longRunning {
		logFormatFlag(fs)
	}
	humanizeFlags(fs)
	return fs, run
}

// execute parses args for c and runs it.
func (c command) execute(ctx context.Context, args []string) error {
	fs, run := c.prepare()
	pos, err := parseArgs(fs, args, c.argsEndFlags, func(w io.Writer) { c.printHelp(w, fs) })
	if err != nil {
		return err
	}
	return run(ctx, pos)
}

func (c command) printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n", strings.TrimSpace(c.usage))
	if hasFlags(fs) {
		where := "before or after the arguments"
		if c.argsEndFlags {
			where = "before the first argument"
		}
		fmt.Fprintf(w, "\nFlags (%s):\n", where)
		printFlags(w, fs)
	}
}

// parseArgs parses flags anywhere among the arguments (`restore URL -o
// out.db`); "--" ends the flags. With argsEndFlags the first positional
// argument does. -h prints help to stdout and returns flag.ErrHelp.
func parseArgs(fs *flag.FlagSet, args []string, argsEndFlags bool, help func(io.Writer)) ([]string, error) {
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

// parseFlags is parseArgs for bench subcommands, whose flag sets carry
// their own Usage.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	humanizeFlags(fs)
	return parseArgs(fs, args, false, func(w io.Writer) {
		// A flag set without its own Usage prints the flag package's "Usage of".
		var b strings.Builder
		fs.SetOutput(&b)
		fs.Usage()
		if !strings.HasPrefix(b.String(), "Usage of ") {
			io.WriteString(w, b.String())
			return
		}
		fmt.Fprintf(w, "Usage: sluice %s [flags]\n\nFlags:\n", strings.TrimPrefix(fs.Name(), "sluice "))
		printFlags(w, fs)
	})
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
	return usageError{cmd: cmd, msg: msg}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printFlags lists fs's flags, sorted, with their type and default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
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

// humanizeFlags gives every duration flag of fs, and every integer flag
// counting bytes (-*-bytes, -*-size), the human syntax of the units package.
func humanizeFlags(fs *flag.FlagSet) {
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

// flagNames lists a command's flags for completion.
func (c command) flagNames() []string {
	fs, _ := c.prepare()
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "-"+f.Name) })
	sort.Strings(names)
	return names
}
