// Package report turns a load run into what people read: a k6-like text
// summary, a JSON document, and a self-contained HTML page whose charts are
// inline SVG (no scripts, fonts or network).
//
// It imports bench/load and the standard library.
package report

import (
	"encoding/json"
	"io"
	"math"
	"time"

	"github.com/sluicedb/sluice/bench/load"
)

// Report is one run, ready to print or save. Latencies are in milliseconds.
type Report struct {
	Scenario    string           `json:"scenario"`
	Description string           `json:"description,omitempty"`
	Target      string           `json:"target"`
	Protocol    string           `json:"protocol"`
	VUs         int              `json:"vus"`
	Date        time.Time        `json:"date"`
	Warmup      float64          `json:"warmup_s"`
	Duration    float64          `json:"duration_s"`
	Requests    int64            `json:"requests"`
	OK          int64            `json:"ok"`
	Rate        float64          `json:"req_per_s"`
	Failures    map[string]int64 `json:"failures"`
	Latency     Latency          `json:"latency_ms"`
	Series      []Point          `json:"series"`
	Histogram   []Bucket         `json:"histogram"`
	Writes      Writes           `json:"writes"`
	// GeneratorCores is the load generator's own CPU use (cores, averaged over
	// the run): it shares the machine with the server.
	GeneratorCores float64 `json:"generator_cores"`
	GeneratorUSReq float64 `json:"generator_us_per_request"`
	Verify         *Verify `json:"verify,omitempty"`
}

// Latency is the k6 set of statistics.
type Latency struct {
	Avg, Min, Med, Max, P90, P95, P99 float64
}

// Point is one second of the run.
type Point struct {
	T        float64 `json:"t_s"`
	Requests int64   `json:"requests"`
	Rate     float64 `json:"req_per_s"` // Requests over the length of this point's interval
	Failures int64   `json:"failures"`
	MeanMS   float64 `json:"mean_ms"`
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// Bucket is one bar of the latency histogram: requests in [FromMS, ToMS).
type Bucket struct {
	FromMS float64 `json:"from_ms"`
	ToMS   float64 `json:"to_ms"`
	Count  int64   `json:"count"`
}

// Writes counts writes over the whole run, warm-up included.
type Writes struct {
	Acked    int64 `json:"acknowledged"`
	Rejected int64 `json:"rejected"`
	Unknown  int64 `json:"unknown"`
}

// Verify is -verify's outcome.
type Verify struct {
	Before       int64  `json:"count_before"`
	Live         int64  `json:"count_live"`
	Restored     int64  `json:"count_restored"`
	RestoreDone  bool   `json:"restore_checked"`
	OK           bool   `json:"ok"`
	Message      string `json:"message"`
	RestoreFrom  string `json:"restored_from,omitempty"`
	RestoreError string `json:"restore_error,omitempty"`
}

// Meta names what was run.
type Meta struct {
	Scenario, Description, Target, Protocol string
	Warmup                                  time.Duration
}

// New builds a report from a run.
func New(m Meta, r *load.Result) *Report {
	rep := &Report{
		Scenario: m.Scenario, Description: m.Description, Target: m.Target, Protocol: m.Protocol,
		VUs: r.VUs, Date: r.Start.UTC().Truncate(time.Second), Warmup: m.Warmup.Seconds(),
		Duration: r.Elapsed.Seconds(), Requests: r.Requests, OK: r.OK, Rate: r.Rate(),
		Failures: r.Failures,
		Writes:   Writes{Acked: r.AckedWrites, Rejected: r.RejectedWrites, Unknown: r.UnknownWrites},
	}
	h := r.Latency
	if h.TotalCount() > 0 {
		rep.Latency = Latency{
			Avg: h.Mean() / 1000, Min: ms(h.Min()), Med: ms(h.ValueAtQuantile(50)), Max: ms(h.Max()),
			P90: ms(h.ValueAtQuantile(90)), P95: ms(h.ValueAtQuantile(95)), P99: ms(h.ValueAtQuantile(99)),
		}
		rep.Histogram = buckets(r)
	}
	prev := 0.0
	for _, s := range r.Series {
		span := s.At.Seconds() - prev
		prev = s.At.Seconds()
		if span < 0.05 { // a sliver of a last second says nothing about a rate
			continue
		}
		rep.Series = append(rep.Series, Point{
			T: s.At.Seconds(), Requests: s.Requests, Rate: float64(s.Requests) / span, Failures: s.Failures,
			MeanMS: s.MeanUS / 1000, P50MS: ms(s.P50US), P99MS: ms(s.P99US), MaxMS: ms(s.MaxUS),
		})
	}
	if r.Elapsed > 0 {
		rep.GeneratorCores = r.GeneratorCPU.Seconds() / r.Elapsed.Seconds()
	}
	if r.Requests > 0 {
		rep.GeneratorUSReq = float64(r.GeneratorCPU.Microseconds()) / float64(r.Requests)
	}
	return rep
}

func ms(us int64) float64 { return float64(us) / 1000 }

// buckets spreads the latency distribution over log-spaced bars.
func buckets(r *load.Result) []Bucket {
	const n = 40
	lo, hi := math.Log10(float64(max(r.Latency.Min(), 1))), math.Log10(float64(r.Latency.Max()+1))
	if hi-lo < 0.5 {
		hi = lo + 0.5
	}
	step := (hi - lo) / n
	out := make([]Bucket, n)
	for i := range out {
		out[i] = Bucket{FromMS: math.Pow(10, lo+float64(i)*step) / 1000, ToMS: math.Pow(10, lo+float64(i+1)*step) / 1000}
	}
	for _, bar := range r.Latency.Distribution() {
		if bar.Count == 0 {
			continue
		}
		i := int((math.Log10(float64(max(bar.From, 1))) - lo) / step)
		out[min(max(i, 0), n-1)].Count += bar.Count
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
