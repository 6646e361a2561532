package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/sluicedb/sluice/replica/watch"
	"github.com/sluicedb/sluice/replicated"
	"github.com/sluicedb/sluice/server/metrics"
)

// sidecarStatus is what the sidecar's -addr listener reports: one entry
// per database, filled as each starts replicating.
type sidecarStatus struct {
	budget time.Duration
	probe  bool // -addr given: watch idle stores too

	mu      sync.Mutex
	targets []string
	reps    map[string]*replicated.Stream
	watches map[string]*watch.Watch
}

func newSidecarStatus(targets []dbTarget, ff failFlags) *sidecarStatus {
	s := &sidecarStatus{budget: ff.budget, probe: ff.addr != "", reps: map[string]*replicated.Stream{}, watches: map[string]*watch.Watch{}}
	for _, t := range targets {
		s.targets = append(s.targets, t.Path)
	}
	sort.Strings(s.targets)
	return s
}

func (s *sidecarStatus) add(path string, r *replicated.Stream, w *watch.Watch) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.reps[path], s.watches[path] = r, w
	s.mu.Unlock()
}

type dbStatus struct {
	DB         string  `json:"db"`
	Ready      bool    `json:"ready"`
	TXID       string  `json:"txid,omitempty"`
	LastOKAge  float64 `json:"last_success_age_seconds,omitempty"`
	Error      string  `json:"error,omitempty"`
	Unshipped  int64   `json:"unshipped_bytes"`
	errorCount int64
	txid       uint64
	lastOK     time.Time
	pages      int64
}

func (s *sidecarStatus) snapshot() []dbStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]dbStatus, 0, len(s.targets))
	for _, p := range s.targets {
		d := dbStatus{DB: p}
		r, w := s.reps[p], s.watches[p]
		if r == nil {
			d.Error = "not replicating yet (waiting for the lease or the first upload)"
			out = append(out, d)
			continue
		}
		h, ws := r.Health(), w.Status()
		d.Ready = ws.Ready
		d.txid, d.TXID = uint64(h.Pos.TXID), h.Pos.TXID.String()
		d.lastOK = ws.LastOK
		if !ws.LastOK.IsZero() {
			d.LastOKAge = time.Since(ws.LastOK).Seconds()
		}
		if ws.LastErr != nil {
			d.Error = ws.LastErr.Error()
		} else if !ws.Ready {
			d.Error = "no upload or probe accepted within the error budget"
		}
		d.Unshipped, d.pages, d.errorCount = h.UnshippedBytes, h.UnshippedPages, h.Errors
		out = append(out, d)
	}
	return out
}

// serve listens on addr at once (so a bad address fails before the
// application starts) and serves /health, /ready and /metrics until ctx ends.
func (s *sidecarStatus) serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		dbs := s.snapshot()
		ready := len(dbs) > 0
		for _, d := range dbs {
			ready = ready && d.Ready
		}
		status, code := "ready", http.StatusOK
		if !ready {
			status, code = "not ready", http.StatusServiceUnavailable
		}
		b, _ := json.Marshal(map[string]any{"status": status, "databases": dbs})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(append(b, '\n'))
	})
	reg := s.registry()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", metrics.ContentType)
		reg.WriteText(w)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("status listener stopped", "addr", addr, "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("serving /health, /ready and /metrics", "addr", ln.Addr().String())
	return nil
}

// registry exports the sidecar's series, named as sluice serve names them.
func (s *sidecarStatus) registry() *metrics.Registry {
	reg := metrics.New()
	db := []string{"db"}
	gauge := func(name, help string, f func(dbStatus) float64) {
		reg.GaugeFunc(name, help, db, func() []metrics.Sample {
			var out []metrics.Sample
			for _, d := range s.snapshot() {
				out = append(out, metrics.Sample{Labels: []string{d.DB}, Value: f(d)})
			}
			return out
		})
	}
	gauge("sluice_replication_txid", "Last TXID accepted by the replica.", func(d dbStatus) float64 { return float64(d.txid) })
	gauge("sluice_unshipped_bytes", "Bytes captured but not yet accepted by the replica.", func(d dbStatus) float64 { return float64(d.Unshipped) })
	gauge("sluice_unshipped_pages", "Pages captured but not yet accepted by the replica.", func(d dbStatus) float64 { return float64(d.pages) })
	gauge("sluice_replica_last_success_age_seconds", "Seconds since the replica last accepted an upload or probe (-1 if never).", func(d dbStatus) float64 {
		if d.lastOK.IsZero() {
			return -1
		}
		return time.Since(d.lastOK).Seconds()
	})
	gauge("sluice_replica_ready", "1 if the replica accepted an upload or probe within the error budget.", func(d dbStatus) float64 {
		if d.Ready {
			return 1
		}
		return 0
	})
	gauge("sluice_upload_errors_total", "Failed uploads.", func(d dbStatus) float64 { return float64(d.errorCount) })
	return reg
}
