package main

import (
	"github.com/sluicedb/sluice/bench/storelatency"

	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicedb/sluice/bench/load"
	"github.com/sluicedb/sluice/internal/minioproc"
)

// sluice-bench handoff: two `sluice serve -lease` instances on one MinIO
// bucket take counter increments; the leader is stopped (SIGTERM, then in a
// second run kill -9) and the handoff gap is the longest time without an
// accepted write around the stop. Then the single-row insert load (one JSON insert per
// request) runs against a leader while a `-follow` replica follows it; the
// follower lag is measured as read-your-writes latency: a probe write on
// the leader, then a read carrying its bookmark on the replica, timed from
// the write's answer to the replica's.

func init() { benchCommands["handoff"] = runBenchHandoff }

func runBenchHandoff(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("handoff", flag.ContinueOnError)
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL of the serve instances (kill -9 is taken over after it)")
	vus := fs.Int("vus", 8, "concurrent writers")
	lagFor := fs.Duration("duration", 10*time.Second, "how long the insert load runs while the follower lag is measured")
	poll := fs.Duration("follow-poll", 200*time.Millisecond, "the replica's poll interval")
	latencyFlag := storeLatencyFlag(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	latency, err := storelatency.Parse(*latencyFlag)
	if err != nil {
		return fmt.Errorf("-store-latency: %w", err)
	}
	sluice, err := sluiceBinary()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-bench-handoff-")
	if err != nil {
		return err
	}
	if os.Getenv("SLUICE_BENCH_KEEP") == "" {
		defer os.RemoveAll(work)
	} else {
		fmt.Println("  work directory kept:", work)
	}
	m, err := minioproc.Start(ctx, filepath.Join(work, "minio"))
	if err != nil {
		return err
	}
	defer m.Stop()
	if err := m.CreateBucket(ctx, "handoff"); err != nil {
		return err
	}
	_, unproxy, err := storelatency.Front(m, latency)
	if err != nil {
		return err
	}
	defer func() {
		if s := unproxy(); s != "" {
			fmt.Printf("store latency added by the proxy (%s): %s\n", latency, s)
		}
	}()
	b := &handoffBench{sluice: sluice, work: work, minio: m, ttl: *ttl, vus: *vus}
	defer b.stopAll()

	store := "MinIO"
	if !latency.Zero() {
		store = "MinIO behind a proxy adding a bucket's latency (" + latency.String() + ")"
	}
	fmt.Printf("sluice bench handoff: 2 x sluice serve -lease (TTL %s) on %s, %d writers alternating between them\n", *ttl, store, *vus)
	put50, get50, get99, err := bareRequests(ctx, m, "handoff", 100)
	if err != nil {
		return err
	}
	fmt.Printf("  bare requests through the same endpoint (reference): conditional PUT p50 %s, GET p50 %s, GET p99 %s\n",
		put50.Round(100*time.Microsecond), get50.Round(100*time.Microsecond), get99.Round(100*time.Microsecond))
	for _, mode := range []string{"SIGTERM", "kill -9"} {
		gap, acked, err := b.handoff(ctx, mode)
		if err != nil {
			return fmt.Errorf("%s handoff: %w", mode, err)
		}
		fmt.Printf("  %-8s handoff gap (longest time without an accepted write): %8s   (%d writes accepted)\n",
			mode, gap.Round(time.Millisecond), acked)
	}
	p50, p99, n, err := b.followerLag(ctx, *lagFor, *poll)
	if err != nil {
		return fmt.Errorf("follower lag: %w", err)
	}
	fmt.Printf("  follower lag under single-row inserts (%d VUs, poll %s), write answered -> visible on the replica, %d probes:\n", *vus, *poll, n)
	fmt.Printf("    p50 %s   p99 %s   (reference: the poll interval, %s)\n", p50.Round(time.Millisecond), p99.Round(time.Millisecond), *poll)
	return nil
}

type handoffBench struct {
	sluice string // the sluice binary
	work   string
	minio  *minioproc.Server
	ttl    time.Duration
	vus    int
	mu     sync.Mutex
	procs  []*exec.Cmd
	runs   int
}

type serveInstance struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

func (b *handoffBench) start(url string, extra ...string) (*serveInstance, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	b.mu.Lock()
	b.runs++
	data := filepath.Join(b.work, "data"+strconv.Itoa(b.runs))
	b.mu.Unlock()
	args := append([]string{"serve", "-listen", addr, "-data", data, "-replica", url}, extra...)
	cmd := exec.Command(b.sluice, args...)
	cmd.Env = append(os.Environ(), b.minio.Env()...)
	logf, err := os.Create(data + ".log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &serveInstance{cmd: cmd, base: "http://" + addr, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(s.done) }()
	b.mu.Lock()
	b.procs = append(b.procs, cmd)
	b.mu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(s.base + "/health"); err == nil {
			resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("sluice serve exited at start; see %s.log", data)
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("sluice serve did not answer /health within 20s; see %s.log", data)
		}
	}
}

func (b *handoffBench) stopAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.procs {
		if c.ProcessState == nil {
			_ = c.Process.Kill()
		}
	}
}

func query(base, body string, hdr ...string) (int, http.Header, string, error) {
	req, _ := http.NewRequest("POST", base+"/v1/databases/default/query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := handoffClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data), nil
}

var handoffClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}

// handoff runs one pair, stops the leader with mode mid-run and returns the
// longest gap between accepted writes.
func (b *handoffBench) handoff(ctx context.Context, mode string) (time.Duration, int, error) {
	url := b.minio.URL("handoff", strings.ReplaceAll(mode, " ", ""))
	lease := []string{"-lease", "-lease-ttl", b.ttl.String()}
	// The standby starts first: an instance started later than the holder
	// asks it to hand over (a deploy), which would move the lease before
	// the stop and leave nothing to measure.
	bb, err := b.start(url, lease...)
	if err != nil {
		return 0, 0, err
	}
	a, err := b.start(url, lease...)
	if err != nil {
		return 0, 0, err
	}
	if code, _, body, err := query(a.base, `{"batch":[{"sql":"CREATE TABLE counters(id TEXT PRIMARY KEY, count INTEGER NOT NULL)"},{"sql":"INSERT INTO counters VALUES ('count_up', 0)"}]}`); err != nil || code != 200 {
		return 0, 0, fmt.Errorf("create the counter: %d %s %v", code, body, err)
	}
	var mu sync.Mutex
	var acks []time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < b.vus; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bases := []string{a.base, bb.base}
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, _, _, err := query(bases[i%2], `{"sql":"UPDATE counters SET count = count + 1 WHERE id = 'count_up' RETURNING count"}`)
				if err == nil && code == 200 {
					mu.Lock()
					acks = append(acks, time.Now())
					mu.Unlock()
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	stopped := time.Now()
	if mode == "SIGTERM" {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
	} else {
		_ = a.cmd.Process.Kill()
	}
	<-a.done
	// Run until b has taken writes for 2 s (or give up after TTL + 30 s).
	deadline := time.Now().Add(b.ttl + 30*time.Second)
	for {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		last := time.Time{}
		if len(acks) > 0 {
			last = acks[len(acks)-1]
		}
		mu.Unlock()
		if last.After(stopped.Add(time.Second)) && time.Since(stopped) > b.ttl+2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			return 0, 0, errors.New("the second instance took no writes within TTL + 30s")
		}
	}
	close(stop)
	wg.Wait()
	_ = bb.cmd.Process.Signal(syscall.SIGTERM)
	<-bb.done
	sort.Slice(acks, func(i, j int) bool { return acks[i].Before(acks[j]) })
	// The hand-over's gap is the longest between two accepted writes that
	// ends after the stop and begins within a window after it (1 s, plus
	// the TTL after kill -9): a pause of either instance before the stop,
	// or of the new holder long after it, is not the hand-over's.
	window := time.Second
	if mode != "SIGTERM" {
		window += b.ttl
	}
	var gap time.Duration
	for i := 1; i < len(acks); i++ {
		if acks[i].After(stopped) && acks[i-1].Before(stopped.Add(window)) {
			gap = max(gap, acks[i].Sub(acks[i-1]))
		}
	}
	return gap, len(acks), nil
}

// followerLag runs the single-row insert load on a leader while probing
// read-your-writes latency on a -follow replica.
func (b *handoffBench) followerLag(ctx context.Context, d, poll time.Duration) (p50, p99 time.Duration, n int, err error) {
	url := b.minio.URL("handoff", "lag")
	leader, err := b.start(url, "-lease", "-lease-ttl", b.ttl.String())
	if err != nil {
		return 0, 0, 0, err
	}
	if code, _, body, err := query(leader.base, `{"sql":"CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, json JSON)"}`); err != nil || code != 200 {
		return 0, 0, 0, fmt.Errorf("create the table: %d %s %v", code, body, err)
	}
	replica, err := b.start(url, "-follow", "-follow-poll", poll.String())
	if err != nil {
		return 0, 0, 0, err
	}
	if code, _, body, err := query(replica.base, `{"sql":"SELECT count(*) FROM t"}`); err != nil || code != 200 {
		return 0, 0, 0, fmt.Errorf("first read on the replica: %d %s %v", code, body, err)
	}
	insert, _ := json.Marshal(map[string]any{"sql": "INSERT INTO t (json) VALUES (?)", "params": []any{`{"age":10, "name":"yamada", "class":"A"}`}})
	req, err := load.NewRequest("POST", leader.base+"/v1/databases/default/query", insert, "Content-Type: application/json")
	if err != nil {
		return 0, 0, 0, err
	}
	var lags []time.Duration
	probeErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		defer close(probeErr)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			code, hdr, body, err := query(leader.base, string(insert))
			if err != nil || code != 200 {
				probeErr <- fmt.Errorf("probe write: %d %s %v", code, body, err)
				return
			}
			acked := time.Now()
			code, _, body, err = query(replica.base, `{"sql":"SELECT count(*) FROM t"}`, "Sluice-Bookmark", hdr.Get("Sluice-Bookmark"))
			if err != nil || code != 200 {
				probeErr <- fmt.Errorf("probe read on the replica: %d %s %v", code, body, err)
				return
			}
			lags = append(lags, time.Since(acked))
		}
	}()
	_, err = load.Run(ctx, load.Config{VUs: b.vus, Duration: d, Warmup: time.Second,
		Next: func(int, uint64) *load.Request { return req }})
	close(stop)
	if perr := <-probeErr; perr != nil {
		return 0, 0, 0, perr
	}
	if err != nil {
		return 0, 0, 0, err
	}
	if len(lags) == 0 {
		return 0, 0, 0, errors.New("no probe completed")
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	return lags[len(lags)/2], lags[min(len(lags)-1, len(lags)*99/100)], len(lags), nil
}
