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
