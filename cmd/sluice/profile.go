package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"time"
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

// startHeapProfiles writes a heap profile of a long-running command to
// path.<pid> every 20 seconds, overwriting the last (SLUICE_HEAPPROFILE=path):
// the way to see what a server that keeps growing holds. The pid tells a
// benchmark's own profile from those of the servers it starts.
func startHeapProfiles(path string) func() {
	path = fmt.Sprintf("%s.%d", path, os.Getpid())
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := writeHeapProfile(path); err != nil {
					fmt.Fprintln(os.Stderr, "sluice: heap profile:", err)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

func writeHeapProfile(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
