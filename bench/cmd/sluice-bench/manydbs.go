package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sluice-bench manydbs: one `sluice serve` (file:// replica) is given N
// databases, each created, written once and left idle, under the
// descriptor limit it inherits. It prints the server's RSS and open
// descriptors empty (the reference), after the creates, and once the idle
// ones are closed; then reads back a sample of databases (reopened without a
// restore) and lists them all.

func init() { benchCommands["manydbs"] = runBenchManyDBs }

func runBenchManyDBs(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("manydbs", flag.ContinueOnError)
	n := fs.Int("n", 10000, "databases to create")
	workers := fs.Int("c", 16, "concurrent clients")
	maxOpen := fs.Int("max-open-databases", 0, "the server's cap on open databases (0: its default)")
	idle := fs.Duration("idle", 5*time.Second, "the server's database idle timeout")
	check := fs.Int("check", 500, "databases read back at the end (spread over all of them)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *n < 1 || *workers < 1 {
		return fmt.Errorf("-n and -c must be positive")
	}
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-bench-manydbs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	srvArgs := []string{"serve", "-listen", addr, "-data", filepath.Join(work, "data"),
		"-replica", "file://" + filepath.Join(work, "replica"), "-database-idle-timeout", idle.String()}
	if *maxOpen > 0 {
		srvArgs = append(srvArgs, "-max-open-databases", strconv.Itoa(*maxOpen))
	}
	cmd := exec.CommandContext(ctx, sluice, srvArgs...)
	logf, err := os.Create(filepath.Join(work, "serve.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *workers}}
	if err := waitHTTP(ctx, client, base+"/v1/databases"); err != nil {
		return fmt.Errorf("serve did not start: %w (log: %s)", err, filepath.Join(work, "serve.log"))
	}
	pid := cmd.Process.Pid
	fmt.Printf("sluice bench manydbs: %d databases, %d clients, descriptor limit %d (soft) / %d (hard), idle timeout %s\n",
		*n, *workers, lim.Cur, lim.Max, idle)
	row := func(label string) {
		rss, fds := procRSS(pid), procFDs(pid)
		fmt.Printf("  %-34s RSS %7.1f MiB  descriptors %6d\n", label, float64(rss)/(1<<20), fds)
	}
	row("empty server (reference)")
	rss0 := procRSS(pid)

	start := time.Now()
	var peakFDs atomic.Int64
	err = parallel(*n, *workers, func(i int) error {
		name := fmt.Sprintf("m%06d", i)
		if err := call(client, "PUT", base+"/v1/databases/"+name, nil); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		body := map[string]any{"batch": []map[string]any{
			{"sql": "CREATE TABLE t(v INTEGER)"},
			{"sql": "INSERT INTO t VALUES (?)", "params": []int{i}},
		}}
		if err := call(client, "POST", base+"/v1/databases/"+name+"/query", body); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if i%200 == 0 {
			if f := int64(procFDs(pid)); f > peakFDs.Load() {
				peakFDs.Store(f)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w\nlast lines of the server's log:\n%s", err, logTail(filepath.Join(work, "serve.log"), 40))
	}
	took := time.Since(start)
	row(fmt.Sprintf("after %d creates+writes", *n))
	fmt.Printf("  %-34s %s (%.0f databases/s), peak descriptors sampled %d\n", "create+write", took.Round(time.Millisecond), float64(*n)/took.Seconds(), peakFDs.Load())
	time.Sleep(*idle + *idle/2 + time.Second)
	row("idle (after the idle timeout)")
	rss1 := procRSS(pid)
	fmt.Printf("  %-34s %.1f KiB RSS per known database ((idle - empty) / n)\n", "", float64(rss1-rss0)/float64(*n)/1024)

	step := max(*n / *check, 1)
	checked := 0
	start = time.Now()
	for i := 0; i < *n; i += step {
		name := fmt.Sprintf("m%06d", i)
		var out struct {
			Results []struct {
				Rows [][]json.Number `json:"rows"`
			} `json:"results"`
		}
		if err := callJSON(client, "POST", base+"/v1/databases/"+name+"/query", map[string]any{"sql": "SELECT v FROM t"}, &out); err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if len(out.Results) != 1 || len(out.Results[0].Rows) != 1 || out.Results[0].Rows[0][0].String() != strconv.Itoa(i) {
			return fmt.Errorf("read %s: got %+v, want one row %d", name, out, i)
		}
		checked++
	}
	fmt.Printf("  %-34s %d databases reopened and read back, %s each\n", "read back", checked, (time.Since(start) / time.Duration(checked)).Round(time.Microsecond))
	var list struct {
		Databases []struct{ Name string } `json:"databases"`
	}
	if err := callJSON(client, "GET", base+"/v1/databases", nil, &list); err != nil {
		return err
	}
	if len(list.Databases) != *n {
		return fmt.Errorf("GET /v1/databases lists %d databases, want %d", len(list.Databases), *n)
	}
	row("after read back and listing")
	return nil
}

func waitHTTP(ctx context.Context, c *http.Client, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func call(c *http.Client, method, url string, body any) error {
	return callJSON(c, method, url, body, nil)
}

func callJSON(c *http.Client, method, url string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		return d.Decode(out)
	}
	return nil
}

// parallel runs fn(i) for i in [0,n) on workers goroutines; the first error wins.
func parallel(n, workers int, fn func(int) error) error {
	var next atomic.Int64
	var once sync.Once
	var first error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err; failed.Store(true) })
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// procRSS is a process's resident set in bytes (Linux; 0 elsewhere).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procFDs counts a process's open descriptors (Linux; 0 elsewhere).
func procFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

func logTail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(all[max(len(all)-lines, 0):], "\n")
}
