package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluicedb/sluice/sqlshell"
)

func init() {
	register(command{
		name:    "sql",
		summary: "run SQL on a served or local database, or open an interactive shell",
		usage: `sluice sql [flags] TARGET ["SQL"]

TARGET is a database served by 'sluice serve' (http://HOST:PORT/db/NAME, or
http://HOST:PORT with -db NAME; -token or $SLUICE_TOKEN for a server with
tokens), used through its JSON API; or a local SQLite file, opened directly
(read-write, with the SQLite build sluice uses; a running 'sluice replicate'
or 'sluice run' ships what is written). A served NAME@TXID or
NAME@2026-11-26T10:00:00Z (/db/app@42) reads that past state, read-only.

With SQL (one or more statements, or one dot-command such as .tables) it runs
it and exits: 1 if anything failed. Without, it reads statements from stdin: an
interactive shell on a terminal (history in ~/.sluice_history), a script
otherwise. Statements end with ';' and may span lines. Dot-commands: .tables,
.schema [T], .dump, .backup FILE, .mode table|csv|json|line, .read FILE,
.history, .help, .quit.

Over HTTP each statement commits on its own; statements between BEGIN and
COMMIT are sent together at COMMIT and run as one transaction. .backup of a
served database reads every table in one read transaction through the API (a
consistent snapshot) and writes a new local SQLite file; for a large database,
'sluice restore' from its replica is faster.`,
		setup: setupSQL,
	})
}

func setupSQL(fs *flag.FlagSet) runFunc {
	db := fs.String("db", "", "database name on the server (when TARGET is the server's URL)")
	token := fs.String("token", "", "bearer token for the server (default $SLUICE_TOKEN)")
	mode := fs.String("mode", "table", "output mode: table, csv, json or line")
	create := fs.Bool("create", false, "create the database if it does not exist (a local file, or a database on the server)")
	return func(ctx context.Context, args []string) error {
		if len(args) < 1 || len(args) > 2 {
			return usagef("sql", "want TARGET and optionally one SQL argument, got %d arguments", len(args))
		}
		if !validShellMode(*mode) {
			return usagef("sql", "-mode %q: want one of %s", *mode, strings.Join(sqlshell.Modes, ", "))
		}
		backend, err := openShellTarget(ctx, args[0], *db, *token, *create)
		if err != nil {
			return err
		}
		sh := &sqlshell.Shell{DB: backend, Out: os.Stdout, ErrOut: os.Stderr, Mode: *mode}
		if len(args) == 2 {
			err = sh.RunText(ctx, args[1])
		} else {
			if isTerminal(os.Stdin) && isTerminal(os.Stdout) {
				if home, herr := os.UserHomeDir(); herr == nil {
					sh.HistoryFile = filepath.Join(home, ".sluice_history")
				}
				fmt.Fprintf(os.Stderr, "sluice sql %s: connected to %s. .help lists the commands; arrows recall, Tab completes, Ctrl-D leaves.\n", buildVersion(), backend.Describe())
				err = sh.RunTerminal(ctx)
			} else {
				sh.Prompt = isTerminal(os.Stdin) // typing with the output piped: prompts, no line editing
				err = sh.Run(ctx, os.Stdin)
			}
		}
		if cerr := backend.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if sh.Errors() > 0 {
			return exitError{code: 1}
		}
		return nil
	}
}

func validShellMode(m string) bool {
	for _, x := range sqlshell.Modes {
		if x == m {
			return true
		}
	}
	return false
}

// openShellTarget opens a served database (an http(s) URL) or a local file.
func openShellTarget(ctx context.Context, target, db, token string, create bool) (sqlshell.Backend, error) {
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		if token == "" {
			token = os.Getenv("SLUICE_TOKEN")
		}
		base, name, err := sqlshell.ParseServedURL(target, db)
		if err != nil {
			return nil, err
		}
		return sqlshell.OpenRemote(ctx, base, name, token, create)
	}
	if strings.Contains(target, "://") {
		return nil, fmt.Errorf("TARGET %q: want http(s)://HOST:PORT/db/NAME or a local database file", target)
	}
	if db != "" {
		return nil, usagef("sql", "-db names a database on a server; TARGET %q is a local file", target)
	}
	return sqlshell.OpenLocal(target, create)
}
