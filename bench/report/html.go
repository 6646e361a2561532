package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteHTML writes a self-contained page: the summary, throughput and latency
// over time, and the latency histogram, drawn as inline SVG.
func (r *Report) WriteHTML(w io.Writer) error {
	var xs, rate, p50, p99, mean []float64
	for _, p := range r.Series {
		xs = append(xs, p.T)
		rate = append(rate, p.Rate)
		p50, p99, mean = append(p50, p.P50MS), append(p99, p.P99MS), append(mean, p.MeanMS)
	}
	data := map[string]any{
		"R":          r,
		"Failed":     r.Requests - r.OK,
		"Kinds":      sortedKinds(r.Failures),
		"Lat":        latencyRows(r.Latency),
		"Throughput": template.HTML(lineChart("Throughput (requests per second)", "req/s", xs, []line{{"req/s", "#2563eb", rate}})),
		"LatencyTS": template.HTML(lineChart("Latency over time (ms)", "ms", xs, []line{
			{"p99", "#dc2626", p99}, {"mean", "#f59e0b", mean}, {"p50", "#16a34a", p50},
		})),
		"Histogram": template.HTML(histogram(r.Histogram)),
	}
	return page.Execute(w, data)
}

func latencyRows(l Latency) [][2]string {
	return [][2]string{{"avg", fmtMS(l.Avg)}, {"min", fmtMS(l.Min)}, {"med", fmtMS(l.Med)}, {"p90", fmtMS(l.P90)},
		{"p95", fmtMS(l.P95)}, {"p99", fmtMS(l.P99)}, {"max", fmtMS(l.Max)}}
}

type line struct {
	name  string
	color string
	ys    []float64
}

const (
	chartW, chartH         = 860, 300
	padL, padR, padT, padB = 70, 20, 36, 40
)

// lineChart draws one or more series against seconds.
func lineChart(title, unit string, xs []float64, lines []line) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, chartW, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/><text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	if len(xs) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#666">no complete second measured</text></svg>`, padL, chartH/2)
		return b.String()
	}
	xmax := xs[len(xs)-1]
	ymax := 0.0
	for _, l := range lines {
		for _, y := range l.ys {
			ymax = math.Max(ymax, y)
		}
	}
	ymax = niceCeil(ymax)
	x := func(v float64) float64 { return padL + v/math.Max(xmax, 1)*float64(chartW-padL-padR) }
	y := func(v float64) float64 { return float64(chartH-padB) - v/ymax*float64(chartH-padT-padB) }
	axes(&b, ymax, unit, func(v float64) float64 { return y(v) })
	for i := 0; i <= 5; i++ {
		v := xmax * float64(i) / 5
		label := fmt.Sprintf("%.0fs", v)
		if xmax < 10 {
			label = fmt.Sprintf("%.1fs", v)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>`, x(v), chartH-padB+16, label)
	}
	for li, l := range lines {
		var pts []string
		for i, v := range l.ys {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(xs[i]), y(v)))
		}
		if len(pts) == 1 { // one second: draw a visible dot
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`, x(xs[0]), y(l.ys[0]), l.color)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.5" points="%s"/>`, l.color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d" font-size="12">%s</text>`,
			chartW-padR-220+li*75, 12, l.color, chartW-padR-204+li*75, 22, template.HTMLEscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// histogram draws the latency distribution as bars on a log-scaled x axis.
func histogram(bs []Bucket) string {
	var b strings.Builder
	title := "Latency histogram (requests per bucket, log-scaled ms)"
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, chartW, chartH, title)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/><text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`, padL, title)
	if len(bs) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#666">no requests</text></svg>`, padL, chartH/2)
		return b.String()
	}
	var cmax int64
	for _, k := range bs {
		cmax = max(cmax, k.Count)
	}
	ymax := niceCeil(float64(cmax))
	y := func(v float64) float64 { return float64(chartH-padB) - v/ymax*float64(chartH-padT-padB) }
	axes(&b, ymax, "", y)
	bw := float64(chartW-padL-padR) / float64(len(bs))
	for i, k := range bs {
		if k.Count > 0 {
			top := y(float64(k.Count))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#7c3aed"><title>%s–%s: %d</title></rect>`,
				padL+float64(i)*bw+1, top, bw-2, float64(chartH-padB)-top, fmtMS(k.FromMS), fmtMS(k.ToMS), k.Count)
		}
		if i%8 == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>`, padL+float64(i)*bw, chartH-padB+16, fmtMS(k.FromMS))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">%s</text>`, chartW-padR, chartH-padB+16, fmtMS(bs[len(bs)-1].ToMS))
	b.WriteString(`</svg>`)
	return b.String()
}

// axes draws the y grid with labels and the x axis line.
func axes(b *strings.Builder, ymax float64, unit string, y func(float64) float64) {
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e5e7eb"/>`, padL, chartW-padR, y(v), y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`, padL-6, y(v)+4, tick(v, unit))
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#111"/>`, padL, chartW-padR, chartH-padB, chartH-padB)
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#111"/>`, padL, padL, padT, chartH-padB)
}

func tick(v float64, unit string) string {
	s := fmt.Sprintf("%.0f", v)
	if v < 10 && v != math.Trunc(v) {
		s = fmt.Sprintf("%.3g", v)
	}
	if unit == "ms" {
		return s + " ms"
	}
	return s
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

var page = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>sluice bench {{.R.Scenario}}: {{.R.Target}}</title>
<style>
body{font-family:system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:24px;color:#111;background:#f8fafc}
h1{font-size:22px;margin:0 0 4px} .sub{color:#555;margin-bottom:16px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:16px}
.card{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:10px 16px;min-width:120px}
.card b{display:block;font-size:22px} .card span{color:#555;font-size:12px}
table{border-collapse:collapse;background:#fff;margin-bottom:16px} td,th{border:1px solid #e5e7eb;padding:4px 10px;text-align:right}
th{background:#f1f5f9} .chart{background:#fff;border:1px solid #e5e7eb;border-radius:8px;margin-bottom:16px;display:inline-block}
.ok{color:#16a34a} .bad{color:#dc2626}
</style></head><body>
<h1>sluice bench {{.R.Scenario}}</h1>
<div class="sub">{{.R.Description}} · target {{.R.Target}} ({{.R.Protocol}}) · {{.R.VUs}} VUs · {{printf "%.1f" .R.Duration}} s measured after {{printf "%.1f" .R.Warmup}} s warm-up · {{.R.Date.Format "2006-01-02 15:04 UTC"}}</div>
<div class="cards">
<div class="card"><b>{{printf "%.0f" .R.Rate}}</b><span>requests / s</span></div>
<div class="card"><b>{{.R.Requests}}</b><span>requests</span></div>
<div class="card"><b class="{{if .Failed}}bad{{else}}ok{{end}}">{{.Failed}}</b><span>failures</span></div>
<div class="card"><b>{{index (index .Lat 2) 1}}</b><span>median latency</span></div>
<div class="card"><b>{{index (index .Lat 5) 1}}</b><span>p99 latency</span></div>
{{with .R.Verify}}<div class="card"><b class="{{if .OK}}ok{{else}}bad{{end}}">{{if .OK}}verified{{else}}MISMATCH{{end}}</b><span>{{.Message}}</span></div>{{end}}
</div>
<table><tr>{{range .Lat}}<th>{{index . 0}}</th>{{end}}</tr><tr>{{range .Lat}}<td>{{index . 1}}</td>{{end}}</tr></table>
{{if .Kinds}}<table><tr><th>failure</th><th>count</th></tr>{{range .Kinds}}<tr><td>{{.}}</td><td>{{index $.R.Failures .}}</td></tr>{{end}}</table>{{end}}
<div class="chart">{{.Throughput}}</div><br>
<div class="chart">{{.LatencyTS}}</div><br>
<div class="chart">{{.Histogram}}</div>
<p class="sub">Writes over the whole run: {{.R.Writes.Acked}} acknowledged, {{.R.Writes.Rejected}} rejected, {{.R.Writes.Unknown}} of unknown outcome. Load generator: {{printf "%.2f" .R.GeneratorCores}} cores.</p>
</body></html>
`))
