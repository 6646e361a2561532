package suite

import (
	"github.com/sluicedb/sluice/bench/storelatency"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ServeOptions is `sluice-bench serve`: sluice serve (sync → MinIO) where
// users feel it, each row beside a reference measured in the same run.
type ServeOptions struct {
	Rows     []string      // row groups, ServeRowGroups
	Duration time.Duration // measured per run
	Warmup   time.Duration
	Sluice   string
	Bench    string // the sluice-bench binary, whose ceiling-server is the ceiling
	Out      io.Writer
	JSON     string // write every row as JSON to this file
	// ProfileDir, if set, receives a CPU profile of sluice serve during the
	// first read run of each protocol (read-100-json.pprof, read-100-hrana.pprof).
	ProfileDir string

	ReadVUs      int           // connections of the read rows [100]
	ReadDuration time.Duration // measured per read run [5s]
	ReadRounds   int           // interleaved rounds of the read rows; medians are reported [3]
	Conns        []int         // connections of the write rows [1 10 50 500]
	Databases    []int         // databases the write rows spread over [1 100]
	Window       time.Duration // the commit window row's -commit-window [5ms]
	WindowConns  int           // its connections [50]
	InsertVUs    int           // the insert comparison's connections [500]
	// StoreLatency, if not zero, puts a real bucket's latency in front of
	// MinIO for everything the run does, the bare PUTs included.
	StoreLatency storelatency.Spec
}

// ServeRowGroups are the row groups of `sluice-bench serve`, in run order.
var ServeRowGroups = []string{"read", "writes", "latency", "window", "insert"}

// DefaultServeRows are the groups `make bench-serve` runs.
var DefaultServeRows = []string{"read", "writes", "latency", "window"}

// The targets each row is judged against.
const (
	TargetReadVsCeiling  = 0.35 // read-100 req/s over the trivial handler returning the same bytes
	TargetHranaVsJSON    = 0.90 // Hrana read-100 req/s over the JSON API's
	TargetManyVsOne      = 0.5  // 100 databases over 1, at 500 connections
	TargetManyP99        = 100 * time.Millisecond
	TargetLatencyOverPut = time.Millisecond // sync p50 at 1 connection over one bare conditional PUT
	TargetWindowFewer    = 5.0              // PUTs per 1,000 writes without the window over with it
)

// ServeRow is one printed row.
type ServeRow struct {
	Group     string    `json:"group"`
	Name      string    `json:"name"`
	Conns     int       `json:"connections"`
	Databases int       `json:"databases,omitempty"`
	Rate      float64   `json:"req_per_s"`
	P50MS     float64   `json:"p50_ms"`
	P99MS     float64   `json:"p99_ms"`
	Failures  int64     `json:"failures"`
	PutsPer1k float64   `json:"puts_per_1000_writes,omitempty"`
	Acked     int64     `json:"acknowledged_writes,omitempty"`
	Verified  string    `json:"verified,omitempty"` // "" for reads
	VerifyOK  bool      `json:"verify_ok"`
	Reference string    `json:"reference,omitempty"`
	Ratio     float64   `json:"ratio,omitempty"`
	Target    string    `json:"target,omitempty"`
	TargetMet bool      `json:"target_met"`
	Runs      []float64 `json:"runs_req_per_s,omitempty"` // read rows: each round's req/s
	// Write rows: CPU per upload over the run, sluice serve's and MinIO's.
	SluiceCPUPerUploadMS float64 `json:"sluice_cpu_ms_per_upload,omitempty"`
	StoreCPUPerPutMS     float64 `json:"minio_cpu_ms_per_put,omitempty"`
	// The many-databases row: the most conditional PUTs per second MinIO
	// took on its own, measured right after the row.
	StorePutsPerSec float64 `json:"minio_bare_puts_per_s,omitempty"`
	// Bound says, with figures from the same run, what limits a row's target.
	Bound string `json:"bound,omitempty"`
}

// ServeResult is every row of one run.
type ServeResult struct {
	Rows   []ServeRow    `json:"rows"`
	Insert *InsertResult `json:"-"`
}

// Serve runs the row groups of o and prints them beside their references.
func Serve(ctx context.Context, o ServeOptions) (*ServeResult, error) {
	o.defaults()
	for _, g := range o.Rows {
		if !slices.Contains(ServeRowGroups, g) {
			return nil, fmt.Errorf("unknown row group %q (known: %s)", g, strings.Join(ServeRowGroups, ", "))
		}
	}
	env, cleanup, err := startEnv(ctx, o.Sluice, o.Bench, "serve", o.Out)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	_, unproxy, err := storelatency.Front(env.MinIO, o.StoreLatency)
	if err != nil {
		return nil, err
	}
	defer func() {
		if s := unproxy(); s != "" {
			fmt.Fprintf(o.Out, "store latency added by the proxy (%s): %s\n", o.StoreLatency, s)
		}
	}()
	res := &ServeResult{}
	started := time.Now()
	want := func(g string) bool { return slices.Contains(o.Rows, g) }
	var writes *writeRows
	if want("read") {
		rows, err := serveReads(ctx, env, o)
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, rows...)
	}
	// Sync latency is measured at low load, before the write rows leave MinIO
	// busy with their objects (bare PUTs measured after them took 0.4 ms more).
	if want("latency") {
		r, err := syncLatency(ctx, env, o)
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, r)
	}
	if want("writes") || want("window") {
		if writes, err = serveWrites(ctx, env, o, want); err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, writes.rows...)
	}
	if want("insert") {
		if res.Insert, err = ServeInsert(ctx, env, o); err != nil {
			return res, err
		}
	}
	printServe(o, res, time.Since(started))
	if o.JSON != "" {
		if err := writeJSONValue(o.JSON, res); err != nil {
			return res, err
		}
	}
	var failed []string
	for _, r := range res.Rows {
		if r.Verified != "" && !r.VerifyOK {
			failed = append(failed, r.Name)
		}
	}
	if len(failed) > 0 {
		return res, fmt.Errorf("acknowledged writes missing after a restore in: %s", strings.Join(failed, ", "))
	}
	return res, nil
}

func (o *ServeOptions) defaults() {
	if len(o.Rows) == 0 {
		o.Rows = DefaultServeRows
	}
	if o.Duration <= 0 {
		o.Duration = 8 * time.Second
	}
	if o.ReadVUs <= 0 {
		o.ReadVUs = 100
	}
	if o.ReadDuration <= 0 {
		o.ReadDuration = 5 * time.Second
	}
	if o.ReadRounds <= 0 {
		o.ReadRounds = 3
	}
	if len(o.Conns) == 0 {
		o.Conns = []int{1, 10, 50, 500}
	}
	if len(o.Databases) == 0 {
		o.Databases = []int{1, 100}
	}
	if o.Window <= 0 {
		o.Window = 5 * time.Millisecond
	}
	if o.WindowConns <= 0 {
		o.WindowConns = 50
	}
	if o.InsertVUs <= 0 {
		o.InsertVUs = 500
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
}

func printServe(o ServeOptions, res *ServeResult, took time.Duration) {
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	if len(res.Rows) == 0 {
		return
	}
	store := "MinIO"
	if !o.StoreLatency.Zero() {
		store = "MinIO behind a proxy adding a bucket's latency: " + o.StoreLatency.String()
	}
	say("\nsluice bench serve — sluice serve (sync → %s), %s measured per run after a %s warm-up; %s, %d CPUs shared by the load generator, the servers and MinIO; took %s",
		store, o.Duration, o.Warmup, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), took.Round(time.Second))
	say("| %-44s | %9s | %9s | %9s | %6s | %9s | %-26s | %-34s | %6s | %-30s |",
		"row", "req/s", "p50", "p99", "fails", "PUT/1k wr", "acknowledged writes", "reference (same run)", "ratio", "target")
	say("|%s|%s:|%s:|%s:|%s:|%s:|%s|%s|%s:|%s|", dashes(46), dashes(10), dashes(10), dashes(10), dashes(7), dashes(10), dashes(28), dashes(36), dashes(7), dashes(32))
	for _, r := range res.Rows {
		puts, ratioS, target := "", "", ""
		if r.PutsPer1k > 0 {
			puts = fmt.Sprintf("%.1f", r.PutsPer1k)
		}
		if r.Ratio > 0 {
			ratioS = fmt.Sprintf("%.2fx", r.Ratio)
		}
		if r.Target != "" {
			target = r.Target + ": " + met(r.TargetMet)
		}
		verified := r.Verified
		if verified == "" {
			verified = "n/a (reads)"
		}
		say("| %-44s | %9.0f | %9s | %9s | %6d | %9s | %-26s | %-34s | %6s | %-30s |",
			r.Name, r.Rate, fmtMS(r.P50MS), fmtMS(r.P99MS), r.Failures, puts, verified, r.Reference, ratioS, target)
	}
	say("(read rows: median of %d interleaved rounds; sync latency: medians of %d rounds alternating with the bare PUTs; write rows: each on a fresh server, then every database restored from MinIO and counted)", o.ReadRounds, latencyRounds)
	for _, r := range res.Rows {
		if r.Bound != "" {
			say("bound of %q: %s", strings.TrimSpace(r.Name), r.Bound)
		}
	}
}

func fmtMS(v float64) string {
	if v == 0 {
		return ""
	}
	if v < 10 {
		return fmt.Sprintf("%.2fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}

func writeJSONValue(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
