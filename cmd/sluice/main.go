// Command sluice keeps SQLite databases durable in object storage: a sidecar
// (replicate, run, restore) and an HTTP server (serve), plus load tests (bench).
//
// Each command lives in its own file; this one only dispatches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

// commands is filled by each command file's init, so adding a command touches one file.
var commands []command

func register(c command) { commands = append(commands, c) }

// exitError carries a specific exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func usage() {
	fmt.Fprintf(os.Stderr, "sluice %s: SQLite, durable in object storage\n\nUsage: sluice COMMAND [flags] [args]\n\nCommands:\n", version)
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "  %-10s %s\n\nRun 'sluice COMMAND -h' for a command's flags.\n\n%s\n", "version", "print the version", exitCodes)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "version", "-version", "--version":
		fmt.Println("sluice", version)
		return
	case "help", "-h", "-help", "--help":
		usage()
		return
	}
	if path := os.Getenv("SLUICE_CPUPROFILE"); path != "" {
		stop := startCPUProfile(path)
		defer stop()
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := c.run(ctx, args)
		stop()
		var ee exitError
		switch {
		case err == nil:
			return
		case errors.Is(err, flag.ErrHelp):
			os.Exit(2)
		case errors.As(err, &ee):
			os.Exit(ee.code)
		default:
			fmt.Fprintf(os.Stderr, "sluice %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "sluice: unknown command %q\n\n", name)
	usage()
	os.Exit(2)
}
