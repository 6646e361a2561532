// Command sluice keeps SQLite databases durable in object storage: a sidecar
// (replicate, run, restore) and an HTTP server (serve). Its load tests are a
// separate binary, sluice-bench (bench/), which `sluice bench` runs.
//
// Each command lives in its own file and registers itself (cli.go); this one
// only dispatches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicedb/sluice/internal/suggest"
)

func usage(w io.Writer) {
	fmt.Fprintf(w, "sluice %s: SQLite, durable in object storage\n\nUsage: sluice COMMAND [flags] [args]   (flags may come before or after the arguments)\n\nCommands:\n", buildVersion())
	for _, c := range sortedCommands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Run 'sluice help COMMAND' (or 'sluice COMMAND -h') for a command's flags.
Durations read 90s, 1h30m or 7d; sizes read 4096, 512KB or 8MiB.

%s
`, exitCodes)
}

func main() { os.Exit(dispatch(os.Args[1:])) }

// dispatch runs the command line args and returns the exit code.
func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	name, args := args[0], args[1:]
	switch name {
	case "-version", "--version":
		name = "version"
	case "-h", "-help", "--help":
		usage(os.Stdout)
		return 0
	case "help":
		if len(args) == 0 {
			usage(os.Stdout)
			return 0
		}
		// `sluice help bench restore` is `sluice bench restore -h`.
		name, args = args[0], append(args[1:], "-h")
	}
	c, ok := findCommand(name)
	if !ok {
		msg := fmt.Sprintf("sluice: unknown command %q", name)
		if s := suggest.Closest(name, commandNames()); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		fmt.Fprintf(os.Stderr, "%s\nRun 'sluice help' for the list of commands.\n", msg)
		return 2
	}
	if path := os.Getenv("SLUICE_CPUPROFILE"); path != "" {
		stop := startCPUProfile(path)
		defer stop()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := c.execute(ctx, args)
	stop()
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // help was printed on stdout
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		cmd := ue.Cmd
		if cmd == "" {
			cmd = name
		}
		fmt.Fprintf(os.Stderr, "sluice %s: %s\nRun 'sluice help %s' for usage.\n", name, ue.Msg, cmd)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "sluice %s: %v\n", name, err)
		return 1
	}
}
