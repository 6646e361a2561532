package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/bench/suite"
	"github.com/sluicedb/sluice/replica/replicaurl"
)

func init() {
	benchCommands["list"] = runBenchList
	benchCommands["ceiling-server"] = runCeilingServer
}

// runBenchList measures LIST latency against object count: why sluice never lists on its hot path.
func runBenchList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	counts := fs.String("objects", "1000,5000,15000", "object counts to measure at, comma-separated")
	parallel := fs.String("parallel", "1,8,32", "concurrent listers, comma-separated")
	runs := fs.Int("runs", 5, "sequential LISTs per count (median reported)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice-bench list [flags] REPLICA_URL\n\nCreates objects under a scratch prefix of REPLICA_URL, times LIST sequentially and with\nparallel listers at each count, then deletes them.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("list", "want exactly one REPLICA_URL")
	}
	o := suite.ListOptions{Runs: *runs, Out: os.Stdout}
	if o.Counts, err = ints(*counts); err != nil {
		return fmt.Errorf("-objects: %w", err)
	}
	if o.Parallel, err = ints(*parallel); err != nil {
		return fmt.Errorf("-parallel: %w", err)
	}
	o.Store, err = replicaurl.Open(ctx, pos[0])
	if err != nil {
		return err
	}
	defer o.Store.Close()
	_, err = suite.List(ctx, o)
	return err
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runCeilingServer is the benchmarks' ceiling: an HTTP handler that reads the
// request and answers 204 (or 200 with the bytes of -body), in its own
// process, so that the load generator measures this machine's HTTP round
// trip and nothing else.
func runCeilingServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ceiling-server", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "listen address")
	bodyFile := fs.String("body", "", "answer 200 with this file's bytes (application/json) instead of 204")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var body []byte
	if *bodyFile != "" {
		var err error
		if body, err = os.ReadFile(*bodyFile); err != nil {
			return err
		}
	}
	length := strconv.Itoa(len(body))
	srv := &http.Server{Addr: *listen, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if body == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{length}
		_, _ = w.Write(body)
	})}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
