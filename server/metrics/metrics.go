// Package metrics is a small Prometheus text-format registry: counters and
// histograms with labels, plus gauges computed at scrape time. It is written
// by hand to keep the server's dependencies to what go.mod already has.
//
// It imports only the standard library.
package metrics

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds every metric; the zero value is not usable, use New.
type Registry struct {
	mu      sync.Mutex
	metrics []metric
	gauges  []gaugeFunc

	// One label's distinct values are bounded (BoundLabel): past max,
	// values are recorded as other, so that clients naming many things
	// cannot grow the registry without end.
	bmu        sync.Mutex
	boundLabel string
	boundMax   int
	boundOther string
	seen       map[string]struct{}
}

// BoundLabel keeps at most max distinct values of label across every
// counter and histogram; observations with any further value are recorded
// under other (e.g. "_other"). Call it before recording anything.
func (r *Registry) BoundLabel(label string, max int, other string) {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	r.boundLabel, r.boundMax, r.boundOther, r.seen = label, max, other, map[string]struct{}{}
}

// Forget frees value of the bounded label (a deleted database): its series
// go, and the slot may be taken by another value.
func (r *Registry) Forget(value string) {
	r.bmu.Lock()
	label := r.boundLabel
	delete(r.seen, value)
	r.bmu.Unlock()
	if label == "" || value == "" {
		return
	}
	r.mu.Lock()
	metrics := append([]metric(nil), r.metrics...)
	r.mu.Unlock()
	for _, m := range metrics {
		m.forget(label, value)
	}
}

// bound returns values with the bounded label's value replaced by the
// overflow value once the bound is reached (a copy; values is not changed).
func (r *Registry) bound(labels, values []string) []string {
	if r == nil {
		return values
	}
	r.bmu.Lock()
	defer r.bmu.Unlock()
	if r.boundLabel == "" {
		return values
	}
	for i, l := range labels {
		if l != r.boundLabel || i >= len(values) || values[i] == "" || values[i] == r.boundOther {
			continue
		}
		if _, ok := r.seen[values[i]]; ok {
			continue
		}
		if len(r.seen) < r.boundMax {
			r.seen[values[i]] = struct{}{}
			continue
		}
		out := append([]string(nil), values...)
		out[i] = r.boundOther
		return out
	}
	return values
}

// Series counts the counter and histogram series held (tests: bounded).
func (r *Registry) Series() int {
	r.mu.Lock()
	metrics := append([]metric(nil), r.metrics...)
	r.mu.Unlock()
	n := 0
	for _, m := range metrics {
		n += m.len()
	}
	return n
}

type metric interface {
	write(w io.Writer, keep Filter)
	forget(label, value string)
	len() int
}

// Filter decides whether one series is written, from its label names and
// values; nil keeps every series.
type Filter func(names, values []string) bool

func (f Filter) keeps(names, values []string) bool { return f == nil || f(names, values) }

// Sample is one gauge value with its label values.
type Sample struct {
	Labels []string
	Value  float64
}

type gaugeFunc struct {
	name, help string
	labels     []string
	fn         func() []Sample
}

// New returns an empty registry.
func New() *Registry { return &Registry{} }

// Counter is a counter vector.
type Counter struct {
	name, help string
	labels     []string
	reg        *Registry
	mu         sync.Mutex
	values     map[string]float64
}

// NewCounter registers a counter with the given label names.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	c := &Counter{name: name, help: help, labels: labels, reg: r, values: map[string]float64{}}
	r.mu.Lock()
	r.metrics = append(r.metrics, c)
	r.mu.Unlock()
	return c
}

// Add adds v to the series with these label values.
func (c *Counter) Add(v float64, labelValues ...string) {
	k := key(c.reg.bound(c.labels, labelValues))
	c.mu.Lock()
	c.values[k] += v
	c.mu.Unlock()
}

// Inc adds one.
func (c *Counter) Inc(labelValues ...string) { c.Add(1, labelValues...) }

// Value returns the current value of one series (for tests).
func (c *Counter) Value(labelValues ...string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[key(labelValues)]
}

func (c *Counter) forget(label, value string) {
	i := slices.Index(c.labels, label)
	if i < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.values {
		if lv := split(k); i < len(lv) && lv[i] == value {
			delete(c.values, k)
		}
	}
}

func (c *Counter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.values)
}

func (c *Counter) write(w io.Writer, keep Filter) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range sortedKeys(c.values) {
		if !keep.keeps(c.labels, split(k)) {
			continue
		}
		fmt.Fprintf(w, "%s%s %s\n", c.name, labelString(c.labels, split(k), "", ""), num(c.values[k]))
	}
}

// Histogram is a histogram vector with fixed buckets.
type Histogram struct {
	name, help string
	labels     []string
	reg        *Registry
	buckets    []float64
	mu         sync.Mutex
	series     map[string]*histSeries
}

type histSeries struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

// NewHistogram registers a histogram with upper bounds buckets (ascending).
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Histogram {
	h := &Histogram{name: name, help: help, labels: labels, reg: r, buckets: buckets, series: map[string]*histSeries{}}
	r.mu.Lock()
	r.metrics = append(r.metrics, h)
	r.mu.Unlock()
	return h
}

// Observe records v in the series with these label values.
func (h *Histogram) Observe(v float64, labelValues ...string) {
	k := key(h.reg.bound(h.labels, labelValues))
	i := sort.SearchFloat64s(h.buckets, v)
	h.mu.Lock()
	s := h.series[k]
	if s == nil {
		s = &histSeries{counts: make([]uint64, len(h.buckets)+1)}
		h.series[k] = s
	}
	s.counts[i]++
	s.sum += v
	s.count++
	h.mu.Unlock()
}

// Count returns how many observations one series has (for tests).
func (h *Histogram) Count(labelValues ...string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.series[key(labelValues)]; s != nil {
		return s.count
	}
	return 0
}

func (h *Histogram) forget(label, value string) {
	i := slices.Index(h.labels, label)
	if i < 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.series {
		if lv := split(k); i < len(lv) && lv[i] == value {
			delete(h.series, k)
		}
	}
}

func (h *Histogram) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series)
}

func (h *Histogram) write(w io.Writer, keep Filter) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", h.name, h.help, h.name)
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.series))
	for k := range h.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s, lv := h.series[k], split(k)
		if !keep.keeps(h.labels, lv) {
			continue
		}
		var cum uint64
		for i, b := range h.buckets {
			cum += s.counts[i]
			fmt.Fprintf(w, "%s_bucket%s %d\n", h.name, labelString(h.labels, lv, "le", num(b)), cum)
		}
		fmt.Fprintf(w, "%s_bucket%s %d\n", h.name, labelString(h.labels, lv, "le", "+Inf"), s.count)
		fmt.Fprintf(w, "%s_sum%s %s\n", h.name, labelString(h.labels, lv, "", ""), num(s.sum))
		fmt.Fprintf(w, "%s_count%s %d\n", h.name, labelString(h.labels, lv, "", ""), s.count)
	}
}

// GaugeFunc registers a gauge whose samples fn computes at every scrape.
func (r *Registry) GaugeFunc(name, help string, labels []string, fn func() []Sample) {
	r.mu.Lock()
	r.gauges = append(r.gauges, gaugeFunc{name: name, help: help, labels: labels, fn: fn})
	r.mu.Unlock()
}

// WriteText writes every metric in Prometheus text format 0.0.4.
func (r *Registry) WriteText(w io.Writer) { r.WriteFiltered(w, nil) }

// WriteFiltered writes the series keep accepts (for a scraper that may see
// only some of them, e.g. some databases). Each metric's lock is held while
// it writes: give it a buffer, never a network connection, so that a
// scraper that does not read cannot stall the requests that record.
func (r *Registry) WriteFiltered(w io.Writer, keep Filter) {
	r.mu.Lock()
	metrics := append([]metric(nil), r.metrics...)
	gauges := append([]gaugeFunc(nil), r.gauges...)
	r.mu.Unlock()
	for _, m := range metrics {
		m.write(w, keep)
	}
	for _, g := range gauges {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, s := range g.fn() {
			if !keep.keeps(g.labels, s.Labels) {
				continue
			}
			fmt.Fprintf(w, "%s%s %s\n", g.name, labelString(g.labels, s.Labels, "", ""), num(s.Value))
		}
	}
}

// ContentType is the scrape response's content type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Label values are joined with a byte that cannot appear in them unescaped.
const sep = "\xff"

func key(values []string) string { return strings.Join(values, sep) }

func split(k string) []string { return strings.Split(k, sep) }

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func labelString(names, values []string, extraName, extraValue string) string {
	var b strings.Builder
	n := 0
	for i, name := range names {
		if i >= len(values) {
			break
		}
		if n == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(name + "=" + strconv.Quote(values[i]))
		n++
	}
	if extraName != "" {
		if n == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(extraName + "=\"" + extraValue + "\"")
		n++
	}
	if n > 0 {
		b.WriteByte('}')
	}
	return b.String()
}

func num(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
