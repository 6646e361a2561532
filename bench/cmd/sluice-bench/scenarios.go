package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/bench/scenario"
	"github.com/sluicedb/sluice/bench/suite"
	"github.com/sluicedb/sluice/bench/targets"
	"github.com/sluicedb/sluice/internal/cliflag"
)

// Each scenario is a subcommand: sluice-bench counter, put-object, ...
func init() {
	for _, name := range scenario.Names() {
		benchCommands[name] = func(ctx context.Context, args []string) error { return runBenchScenario(ctx, name, args) }
	}
}

func runBenchScenario(ctx context.Context, name string, args []string) error {
	s, err := scenario.Get(name)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet(""+name, flag.ContinueOnError)
	url := fs.String("url", "", "sluice serve to load (default: start one with a file replica in a temp dir)")
	db := fs.String("database", s.DB, "name of the database the load writes to")
	protocol := fs.String("protocol", scenario.JSON, "json (sluice's JSON API), hrana (libSQL's protocol) or peer (bench/peers routes)")
	vus := fs.Int("vus", 10, "virtual users (each with its own keep-alive connection)")
	duration := fs.Duration("duration", 10*time.Second, "measured duration (after the warm-up)")
	requests := fs.Int64("requests", 0, "measured requests instead of a duration")
	warmup := fs.Duration("warmup", time.Second, "warm-up left out of the figures")
	timeout := fs.Duration("timeout", 60*time.Second, "per-request timeout")
	verify := fs.Bool("verify", false, "afterwards, check the database and its restored replica hold exactly the acknowledged writes")
	replicaURL := fs.String("replica", "", "the server's replica root (restore <replica>/<db> for -verify; with no -url, where the started server replicates)")
	durability := fs.String("durability", "sync", "with no -url: the started server's durability (sync or async)")
	token := fs.String("token", "", "bearer token")
	jsonOut := fs.String("json", "", "write the results as JSON to this file")
	htmlOut := fs.String("html", "", "write a self-contained HTML report to this file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice-bench %s [flags]\n\n%s.\n\nFlags:\n", name, s.Description)
		fs.PrintDefaults()
	}
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *requests > 0 && !cliflag.IsSet(fs, "warmup") {
		*warmup = 0
	}
	opts := suite.RunOptions{
		Scenario: s, VUs: *vus, Duration: *duration, Requests: *requests, Warmup: *warmup, Timeout: *timeout, Verify: *verify,
		Target: scenario.Target{BaseURL: strings.TrimSuffix(*url, "/"), DB: *db, Protocol: *protocol, Token: *token},
	}
	if isTerminal(os.Stderr) {
		opts.Progress = os.Stderr
	}
	if *url == "" {
		sluice, err := sluiceBinary()
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		env := &targets.Env{Sluice: sluice, Dir: dir, ReplicaRoot: *replicaURL}
		srv, err := env.StartSluice(ctx, *durability)
		if err != nil {
			return err
		}
		defer srv.Stop()
		fmt.Fprintf(os.Stderr, "started %s at %s (replica %s)\n", srv.Name, srv.URL, srv.Replica)
		opts.Target.BaseURL, opts.Label = srv.URL, srv.Name
		*replicaURL = srv.Replica
	} else {
		opts.Label = opts.Target.BaseURL
	}
	if *verify && s.Writes() && !(*protocol == scenario.Peer && *replicaURL == "") {
		if *replicaURL == "" {
			return errors.New("-verify against -url needs -replica URL (the server's replica root) to check the restored copy too")
		}
		sluice, err := sluiceBinary()
		if err != nil {
			return err
		}
		from := targets.JoinURL(*replicaURL, *db)
		opts.RestoreFrom = from
		opts.Restore = func(ctx context.Context, out string) error {
			return runQuiet(ctx, sluice, "restore", "-q", "-o", out, from)
		}
	}
	out, runErr := suite.Run(ctx, opts)
	if out == nil {
		return runErr
	}
	out.Report.WriteText(os.Stdout)
	if err := writeReports(out.Report, *jsonOut, *htmlOut); err != nil {
		return err
	}
	return runErr
}

func writeReports(r *report.Report, jsonPath, htmlPath string) error {
	for _, w := range []struct {
		path  string
		write func(f *os.File) error
	}{
		{jsonPath, func(f *os.File) error { return r.WriteJSON(f) }},
		{htmlPath, func(f *os.File) error { return r.WriteHTML(f) }},
	} {
		if w.path == "" {
			continue
		}
		f, err := os.Create(w.path)
		if err != nil {
			return err
		}
		if err := w.write(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", w.path, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", w.path)
	}
	return nil
}
