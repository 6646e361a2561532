package metrics

import (
	"strings"
	"testing"
)

func TestTextFormat(t *testing.T) {
	r := New()
	c := r.NewCounter("x_total", "Things.", "db", "code")
	c.Inc("a", "200")
	c.Add(2, "a", "200")
	c.Inc("b", "500")
	h := r.NewHistogram("lat_seconds", "Latency.", []float64{0.1, 1}, "db")
	h.Observe(0.05, "a")
	h.Observe(0.5, "a")
	h.Observe(5, "a")
	r.GaugeFunc("g", "Gauge.", []string{"db"}, func() []Sample { return []Sample{{Labels: []string{"a"}, Value: 1.5}} })
	var b strings.Builder
	r.WriteText(&b)
	want := `# HELP x_total Things.
# TYPE x_total counter
x_total{db="a",code="200"} 3
x_total{db="b",code="500"} 1
# HELP lat_seconds Latency.
# TYPE lat_seconds histogram
lat_seconds_bucket{db="a",le="0.1"} 1
lat_seconds_bucket{db="a",le="1"} 2
lat_seconds_bucket{db="a",le="+Inf"} 3
lat_seconds_sum{db="a"} 5.55
lat_seconds_count{db="a"} 3
# HELP g Gauge.
# TYPE g gauge
g{db="a"} 1.5
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

// A bounded label keeps its first values and records the rest under one
// overflow value; a forgotten value's series go and its slot is free again.
func TestBoundLabelAggregatesAndForgets(t *testing.T) {
	r := New()
	r.BoundLabel("db", 2, "_other")
	c := r.NewCounter("c_total", "c", "route", "db")
	h := r.NewHistogram("h_seconds", "h", []float64{1}, "db")
	for _, db := range []string{"a", "b", "c", "d", "a"} {
		c.Inc("r", db)
		h.Observe(0.5, db)
	}
	if c.Value("r", "a") != 2 || c.Value("r", "b") != 1 || c.Value("r", "_other") != 2 || c.Value("r", "c") != 0 {
		t.Fatalf("a=%v b=%v _other=%v c=%v", c.Value("r", "a"), c.Value("r", "b"), c.Value("r", "_other"), c.Value("r", "c"))
	}
	if n := r.Series(); n != 6 {
		t.Fatalf("%d series, want 6 (3 per metric)", n)
	}
	r.Forget("a")
	c.Inc("r", "e")
	if c.Value("r", "a") != 0 || c.Value("r", "e") != 1 || h.Count("a") != 0 {
		t.Fatalf("after forgetting a: a=%v e=%v", c.Value("r", "a"), c.Value("r", "e"))
	}
}
