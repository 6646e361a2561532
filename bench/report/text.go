package report

import (
	"fmt"
	"io"
	"sort"
)

// WriteText prints a k6-like summary.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("  scenario: %s (%s)", r.Scenario, r.Description)
	p("  target:   %s [%s], %d VUs, %.1f s measured after a %.1f s warm-up", r.Target, r.Protocol, r.VUs, r.Duration, r.Warmup)
	p("")
	failed := r.Requests - r.OK
	pct := 0.0
	if r.Requests > 0 {
		pct = 100 * float64(failed) / float64(r.Requests)
	}
	p("  http_reqs..................: %-10d %.1f/s", r.Requests, r.Rate)
	p("  http_req_failed............: %.2f%%  %d of %d", pct, failed, r.Requests)
	for _, k := range sortedKinds(r.Failures) {
		p("    %-25s: %d", k, r.Failures[k])
	}
	l := r.Latency
	p("  http_req_duration..........: avg=%s min=%s med=%s max=%s p(90)=%s p(95)=%s p(99)=%s",
		fmtMS(l.Avg), fmtMS(l.Min), fmtMS(l.Med), fmtMS(l.Max), fmtMS(l.P90), fmtMS(l.P95), fmtMS(l.P99))
	if r.Writes.Acked+r.Writes.Rejected+r.Writes.Unknown > 0 {
		p("  writes (warm-up included)..: %d acknowledged, %d rejected, %d unknown outcome", r.Writes.Acked, r.Writes.Rejected, r.Writes.Unknown)
	}
	p("  load generator.............: %.2f cores, %.1f µs CPU per request", r.GeneratorCores, r.GeneratorUSReq)
	if v := r.Verify; v != nil {
		status := "FAILED"
		if v.OK {
			status = "ok"
		}
		p("  verify.....................: %s: %s", status, v.Message)
	}
	p("")
}

func sortedKinds(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || (m[ks[i]] == m[ks[j]] && ks[i] < ks[j]) })
	return ks
}

// fmtMS prints a latency the way k6 does: µs below 1 ms, ms below 1 s, else s.
func fmtMS(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.0fµs", v*1000)
	case v < 1000:
		return fmt.Sprintf("%.2fms", v)
	default:
		return fmt.Sprintf("%.2fs", v/1000)
	}
}

// FormatMS is fmtMS for tables printed elsewhere.
func FormatMS(v float64) string { return fmtMS(v) }
