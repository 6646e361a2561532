package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	pprofhttp "net/http/pprof"
	"os"
	"runtime/pprof"

	"github.com/sluicedb/sluice/server"
)

// startCPUProfile writes a CPU profile of the whole command to path
// (SLUICE_CPUPROFILE=path): the way to see where a slow restore spends time.
func startCPUProfile(path string) func() {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: cpu profile:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "sluice: cpu profile:", err)
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// servePprof serves net/http/pprof's handlers on addr, apart from the API
// (so profiling never shares a port, a token or a route with clients). Only
// a loopback address is accepted: the profiler has no authentication.
func servePprof(addr string, logger *slog.Logger) error {
	if !server.IsLoopback(addr) {
		return fmt.Errorf("-pprof %s: the profiler has no authentication; give a loopback address such as 127.0.0.1:6060", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprofhttp.Index)
	mux.HandleFunc("/debug/pprof/profile", pprofhttp.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprofhttp.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprofhttp.Trace)
	logger.Info("profiler listening", "addr", ln.Addr().String())
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
