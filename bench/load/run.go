package load

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Config describes one run.
type Config struct {
	VUs      int
	Duration time.Duration // measured duration (after the warm-up); ignored if Requests > 0
	Requests int64         // measured requests (after the warm-up); 0: run for Duration
	Warmup   time.Duration // requests started during the warm-up are left out of the figures
	Timeout  time.Duration // per request (default 60 s)
	// Next returns the request VU vu sends as its iter-th request (counting from 0).
	Next func(vu int, iter uint64) *Request
	// OnSecond, if set, receives each measured second (each Window) as it ends (for live progress).
	OnSecond func(Second)
	// Window is the length of one entry of the series (default one second);
	// a soak reports 10-second windows.
	Window time.Duration
}

// Second is one entry of the series: a second of the measured window, or a
// Config.Window when one is set.
type Second struct {
	At       time.Duration // end of this entry, from the start of the measured window
	Requests int64         // answers received in this second (successes and failures)
	Failures int64
	MeanUS   float64
	P50US    int64
	P99US    int64
	MaxUS    int64
}

// Result holds a run's figures. Latencies are in microseconds.
type Result struct {
	VUs      int
	Start    time.Time     // start of the measured window
	Elapsed  time.Duration // measured window, up to the last answer
	Requests int64         // measured answers and failures
	OK       int64
	Failures map[string]int64 // by kind: "http 503", "timeout", "connect error", ...
	Latency  *hdrhistogram.Histogram
	Series   []Second

	WarmupRequests int64

	// Over the whole run, warm-up included, for verifying what the database holds.
	AckedWrites    int64 // writes answered 2xx (and passing Check)
	RejectedWrites int64 // writes answered with a definite error (4xx, or an error inside a 2xx)
	UnknownWrites  int64 // writes sent but answered 5xx, timed out or cut off: applied or not

	// The generator's own cost: CPU time this process used during the measured window.
	GeneratorCPU time.Duration
}

// Rate is measured requests per second.
func (r *Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// FailureKinds returns the failure kinds sorted by count, largest first.
func (r *Result) FailureKinds() []string {
	kinds := make([]string, 0, len(r.Failures))
	for k := range r.Failures {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if r.Failures[kinds[i]] != r.Failures[kinds[j]] {
			return r.Failures[kinds[i]] > r.Failures[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	return kinds
}

// FailedRequests is the number of measured failures of any kind.
func (r *Result) FailedRequests() int64 { return r.Requests - r.OK }

const (
	histMaxUS  = 300_000_000 // 300 s
	shardCount = 16
)

// shard is a slice of the recorder; VUs spread over shards to avoid one hot lock.
type shard struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram
	window   *hdrhistogram.Histogram
	winReq   int64
	winFail  int64
	ok       int64
	failures map[string]int64
	lastDone time.Time
}

// Run drives the load until the duration or request count is reached or ctx
// ends, waits for every request in flight, and returns the figures.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.VUs <= 0 {
		return nil, errors.New("load: VUs must be at least 1")
	}
	if cfg.Next == nil {
		return nil, errors.New("load: Config.Next is required")
	}
	if cfg.Duration <= 0 && cfg.Requests <= 0 {
		return nil, errors.New("load: give a duration or a request count")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	shards := make([]*shard, shardCount)
	for i := range shards {
		shards[i] = &shard{
			total:    hdrhistogram.New(1, histMaxUS, 3),
			window:   hdrhistogram.New(1, histMaxUS, 2),
			failures: map[string]int64{},
		}
	}
	var (
		acked, rejected, unknown, warm atomic.Int64
		tickets                        atomic.Int64
	)
	tickets.Store(cfg.Requests)
	begin := time.Now()
	measureFrom := begin.Add(cfg.Warmup)
	stopAt := measureFrom.Add(cfg.Duration)
	stopped := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopped) }) }
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-stopped:
		}
	}()

	var cpuStart time.Duration
	var cpuOnce sync.Once
	markStart := func() { cpuOnce.Do(func() { cpuStart = cpuTime() }) }
	if cfg.Warmup <= 0 {
		markStart()
	}

	var wg sync.WaitGroup
	for vu := 0; vu < cfg.VUs; vu++ {
		wg.Add(1)
		go func(vu int) {
			defer wg.Done()
			sh := shards[vu%shardCount]
			c := &vuConn{timeout: cfg.Timeout}
			defer c.close()
			for iter := uint64(0); ; iter++ {
				select {
				case <-stopped:
					return
				default:
				}
				started := time.Now()
				measured := !started.Before(measureFrom)
				if measured {
					markStart()
					if cfg.Requests > 0 {
						if tickets.Add(-1) < 0 {
							stop()
							return
						}
					} else if !started.Before(stopAt) {
						stop()
						return
					}
				}
				req := cfg.Next(vu, iter)
				o := c.do(req)
				done := time.Now()
				if req.Write {
					switch {
					case o.failure == "":
						acked.Add(1)
					case o.status >= 400 && o.status < 500, o.status >= 200 && o.status < 300:
						rejected.Add(1)
					case o.sent:
						unknown.Add(1)
					default:
						rejected.Add(1) // never reached the server
					}
				}
				if !measured {
					warm.Add(1)
					continue
				}
				us := done.Sub(started).Microseconds()
				if us < 1 {
					us = 1
				}
				sh.mu.Lock()
				sh.winReq++
				if o.status != 0 {
					_ = sh.total.RecordValue(min(us, histMaxUS))
					_ = sh.window.RecordValue(min(us, histMaxUS))
				}
				if o.failure == "" {
					sh.ok++
				} else {
					sh.winFail++
					sh.failures[o.failure]++
				}
				if done.After(sh.lastDone) {
					sh.lastDone = done
				}
				sh.mu.Unlock()
				if o.failure == FailConnect {
					// Do not spin on a dead server.
					select {
					case <-stopped:
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}(vu)
	}

	// The per-second series, from the start of the measured window.
	var series []Second
	tickDone := make(chan struct{})
	go func() {
		defer close(tickDone)
		select {
		case <-stopped:
			return
		case <-time.After(time.Until(measureFrom)):
		}
		t := time.NewTicker(cfg.Window)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-stopped:
				return
			case <-t.C:
			}
			s := collectSecond(shards, time.Duration(n)*cfg.Window)
			series = append(series, s)
			if cfg.OnSecond != nil {
				cfg.OnSecond(s)
			}
		}
	}()
	wg.Wait()
	stop()
	<-tickDone
	cpuEnd := cpuTime()

	res := &Result{
		VUs:            cfg.VUs,
		Start:          measureFrom,
		Failures:       map[string]int64{},
		Latency:        hdrhistogram.New(1, histMaxUS, 3),
		Series:         series,
		WarmupRequests: warm.Load(),
		AckedWrites:    acked.Load(),
		RejectedWrites: rejected.Load(),
		UnknownWrites:  unknown.Load(),
		GeneratorCPU:   cpuEnd - cpuStart,
	}
	var last time.Time
	for _, sh := range shards {
		res.Latency.Merge(sh.total)
		res.OK += sh.ok
		for k, v := range sh.failures {
			res.Failures[k] += v
			res.Requests += v
		}
		if sh.lastDone.After(last) {
			last = sh.lastDone
		}
	}
	res.Requests += res.OK
	if !last.IsZero() && last.After(measureFrom) {
		res.Elapsed = last.Sub(measureFrom)
	}
	// The last, partial second: whatever the ticker had not collected yet.
	if tail := collectSecond(shards, res.Elapsed); tail.Requests > 0 && res.Elapsed > 0 {
		res.Series = append(res.Series, tail)
	}
	return res, nil
}

func collectSecond(shards []*shard, at time.Duration) Second {
	h := hdrhistogram.New(1, histMaxUS, 2)
	s := Second{At: at}
	for _, sh := range shards {
		sh.mu.Lock()
		h.Merge(sh.window)
		sh.window.Reset()
		s.Requests += sh.winReq
		s.Failures += sh.winFail
		sh.winReq, sh.winFail = 0, 0
		sh.mu.Unlock()
	}
	if h.TotalCount() > 0 {
		s.MeanUS = h.Mean()
		s.P50US = h.ValueAtQuantile(50)
		s.P99US = h.ValueAtQuantile(99)
		s.MaxUS = h.Max()
	}
	return s
}

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
