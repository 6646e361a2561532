package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/bench/load"
)

// loadResult is the load's figures and the acknowledgements it recorded.
type loadResult struct {
	r *load.Result
	a *acks
}

// drive runs the load and, beside it, the sampler that turns each of the
// load's windows into a table row.
func drive(ctx context.Context, o Options, g *rig) (loadResult, *sampler, error) {
	names := g.names
	urls := make([]string, len(names))
	for i, n := range names {
		urls[i] = g.srv.URL + "/v1/databases/" + url.PathEscape(n) + "/query"
	}
	a := newAcks(o.Connections)
	results := []byte(`{"results"`)
	next := func(vu int, iter uint64) *load.Request {
		a.sent[vu] = iter + 1
		r := load.MustRequest("POST", urls[dbFor(vu, iter, len(names))], insertBody(rowKey(vu, iter)), "Content-Type: application/json")
		r.Write = true
		r.Check = func(body []byte) string {
			if !bytes.HasPrefix(body, results) {
				return "2xx without results"
			}
			a.acked[vu] = append(a.acked[vu], uint32(iter))
			return ""
		}
		return r
	}

	// Shipped counts from TXID 0, so the first window includes the files
	// that created the databases: they are part of the backlog too.
	s := &sampler{pid: g.srv.Pid(), storePort: g.minioPort, root: g.root, baseURL: g.srv.URL, out: o.Out, window: o.Window,
		compacted: map[string]bool{}, events: make(chan load.Second, 4096), done: make(chan struct{})}
	s.header()
	go s.run()
	var delivered atomic.Int64
	res, err := load.Run(ctx, load.Config{
		VUs: o.Connections, Duration: o.Duration, Window: o.Window, Next: next,
		OnSecond: func(w load.Second) { delivered.Add(1); s.events <- w },
	})
	if err == nil && int64(len(res.Series)) > delivered.Load() {
		s.events <- res.Series[len(res.Series)-1] // the partial last window
	}
	close(s.events)
	<-s.done
	if err != nil {
		return loadResult{}, nil, err
	}
	return loadResult{r: res, a: a}, s, nil
}

// compactedFiles counts the distinct level-1+ files seen, and those of level 1.
func (s *sampler) compactedFiles() (all, level1 int) {
	for k := range s.compacted {
		all++
		if strings.HasPrefix(k, "1/") {
			level1++
		}
	}
	return all, level1
}

// sampler samples the server process every second and, at each window's
// end, the bucket; it prints one row per window.
type sampler struct {
	pid, storePort int
	root, baseURL  string
	out            io.Writer
	window         time.Duration

	events chan load.Second
	done   chan struct{}

	peak      procSample
	probeErr  error
	lastTXID  int64
	compacted map[string]bool
	windows   []Window
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sample()
		case w, ok := <-s.events:
			if !ok {
				return
			}
			s.sample()
			s.row(w)
		}
	}
}

func (s *sampler) sample() {
	p, err := sampleProc(s.pid, s.storePort)
	if err != nil {
		s.probeErr = err
		return
	}
	s.peak.RSS = max(s.peak.RSS, p.RSS)
	s.peak.FDs = max(s.peak.FDs, p.FDs)
	s.peak.StoreConns = max(s.peak.StoreConns, p.StoreConns)
}

func (s *sampler) row(w load.Second) {
	win := Window{Index: len(s.windows) + 1, End: w.At, EndS: w.At.Seconds(), Errors: w.Failures,
		Acked: w.Requests - w.Failures, P99MS: float64(w.P99US) / 1000,
		RSS: s.peak.RSS, FDs: s.peak.FDs, StoreConns: s.peak.StoreConns}
	// The last window ends when the load stops, a few milliseconds either
	// side of a boundary or well inside one: judge it by its length.
	var prevEnd time.Duration
	if n := len(s.windows); n > 0 {
		prevEnd = s.windows[n-1].End
	}
	length := w.At - prevEnd
	win.Partial = length < s.window*9/10
	if s.probeErr != nil {
		win.ProbeError = s.probeErr.Error()
	}
	s.peak, s.probeErr = procSample{}, nil
	if m, err := sampleMemory(context.Background(), s.baseURL); err != nil {
		win.ProbeError = err.Error()
	} else {
		win.GoMapped, win.SQLiteMem = m.GoMapped, m.SQLite
	}
	if b, err := scanMinIO(s.root, false); err != nil {
		win.ProbeError = err.Error()
	} else {
		win.Objects, win.L0Files, win.L0Backlog = b.Objects, b.L0Files, b.L0Behind
		win.Shipped = max(0, b.MaxTXID-s.lastTXID)
		s.lastTXID = max(s.lastTXID, b.MaxTXID)
		for _, k := range b.Compacted {
			s.compacted[k] = true
		}
	}
	s.windows = append(s.windows, win)
	secs := max(length.Seconds(), 0.001)
	note := ""
	if win.Partial {
		note = " (partial)"
	}
	if win.ProbeError != "" {
		note += " probe: " + win.ProbeError
	}
	p99 := "-" // no answer in the window
	if win.Acked+win.Errors > 0 {
		p99 = fmt.Sprintf("%.1f", win.P99MS)
	}
	label := fmtDur(win.End)
	if win.Partial {
		label = win.End.Round(100 * time.Millisecond).String()
	}
	fmt.Fprintf(s.out, "%7s %9.1f %7d %9s %8.1f %6.1f %6.1f %6d %6d %8d %8d %10d%s\n",
		label, float64(win.Acked)/secs, win.Errors, p99, float64(win.RSS)/(1<<20),
		float64(win.GoMapped)/(1<<20), float64(win.SQLiteMem)/(1<<20), win.FDs, win.StoreConns, win.Objects, win.L0Files, win.L0Backlog, note)
}

func (s *sampler) header() {
	fmt.Fprintf(s.out, "%7s %9s %7s %9s %8s %6s %6s %6s %6s %8s %8s %10s\n",
		"window", "acked/s", "errors", "p99 ms", "RSS MiB", "Go", "SQLite", "fds", "store", "objects", "L0 files", "L0 backlog")
}
