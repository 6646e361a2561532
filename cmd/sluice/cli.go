package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/sluicedb/sluice/internal/cliflag"
	"golang.org/x/term"
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
	// argWords are the only positional arguments the command takes, offered by
	// shell completion instead of file names (completion's shells).
	argWords []string
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
type usageError = cliflag.UsageError

func usagef(cmd, format string, args ...any) error { return cliflag.Usagef(cmd, format, args...) }

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
	cliflag.Humanize(fs)
	return fs, run
}

// execute parses args for c and runs it.
func (c command) execute(ctx context.Context, args []string) error {
	fs, run := c.prepare()
	pos, err := cliflag.Parse(fs, args, c.argsEndFlags, func(w io.Writer) { c.printHelp(w, fs) })
	if err != nil {
		return err
	}
	return run(ctx, pos)
}

func (c command) printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n", strings.TrimSpace(c.usage))
	if cliflag.HasFlags(fs) {
		where := "before or after the arguments"
		if c.argsEndFlags {
			where = "before the first argument"
		}
		fmt.Fprintf(w, "\nFlags (%s):\n", where)
		cliflag.PrintDefaults(w, fs)
	}
}

// flagSet reports whether flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool { return cliflag.IsSet(fs, name) }

// flagNames lists a command's flags for completion.
func (c command) flagNames() []string {
	fs, _ := c.prepare()
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, "-"+f.Name) })
	sort.Strings(names)
	return names
}

// isTerminal reports whether f is a terminal (interactive prompts, progress);
// /dev/null is a character device too, but no terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
