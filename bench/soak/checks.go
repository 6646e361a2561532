package soak

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replica"
)

func (r *Report) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// checkWindows fails every run of full windows that acknowledged nothing
// (a run of silent windows is one failure).
func (r *Report) checkWindows(window time.Duration) {
	windows := r.Windows
	for i := 0; i < len(windows); i++ {
		w := windows[i]
		if w.Partial || w.Acked > 0 {
			continue
		}
		j, errs := i, w.Errors
		for j+1 < len(windows) && !windows[j+1].Partial && windows[j+1].Acked == 0 {
			j++
			errs += windows[j].Errors
		}
		which := fmt.Sprintf("window %d", w.Index)
		if j > i {
			which = fmt.Sprintf("windows %d-%d", w.Index, windows[j].Index)
		}
		r.fail("%s (%s-%s): no acknowledged writes (%d error answers; every other request still waiting)",
			which, fmtDur(w.End-window), fmtDur(windows[j].End), errs)
		i = j
	}
}

// slowest describes the slowest full window beside the median one: a
// window far below the median is a stall short of a silent window.
func (r *Report) slowest() string {
	var acked []int64
	low := -1
	for i, w := range r.Windows {
		if w.Partial {
			continue
		}
		acked = append(acked, w.Acked)
		if low < 0 || w.Acked < r.Windows[low].Acked {
			low = i
		}
	}
	if low < 0 {
		return "no full window"
	}
	slices.Sort(acked)
	med, w := acked[len(acked)/2], r.Windows[low]
	pct := 0.0
	if med > 0 {
		pct = 100 * float64(w.Acked) / float64(med)
	}
	return fmt.Sprintf("acknowledged writes per window: median %d, slowest %d (window %d, %.0f%% of the median)", med, w.Acked, w.Index, pct)
}

// checkRestore fails a restore that lost an acknowledged write, holds a row
// nobody sent, or more unacknowledged rows than writes had an unknown outcome.
func (r *Report) checkRestore(c Check) {
	r.Check = c
	switch {
	case c.Acked == 0:
		r.fail("restore check: no write was acknowledged, nothing to check")
	case c.Present != c.Acked:
		r.fail("restore check: %d of %d acknowledged writes missing from the restored copies (first: %s)", c.Acked-c.Present, c.Acked, c.Missing)
	}
	if c.Foreign > 0 {
		r.fail("restore check: %d restored rows carry a key no client sent to that database", c.Foreign)
	}
	if c.Unacked > r.Unknown {
		r.fail("restore check: %d restored rows were not acknowledged but only %d writes had an unknown outcome", c.Unacked, r.Unknown)
	}
}

// printVerdicts prints each rule's outcome and fails those that did not hold.
func (r *Report) printVerdicts(out io.Writer, warmup time.Duration) {
	fmt.Fprintf(out, "\nbounded? (windows from %s on; peaks compared as printed)\n", fmtDur(warmup))
	for _, v := range r.Verdicts {
		status := "ok  "
		switch {
		case !v.Judged:
			status = "n/a "
		case !v.OK:
			status = "FAIL"
			r.fail("%s is not bounded: %s", v.Resource, v.Detail)
		}
		fmt.Fprintf(out, "  %s %-21s %s\n       rule: %s\n", status, v.Resource, v.Detail, v.Rule)
	}
}

// judge applies the rules to the windows.
func judge(windows []Window, warmup, l1 time.Duration) []Verdict {
	// Level-0 files stay in the bucket for L0Retention after compaction, so
	// the object count rightly grows until then.
	settled := warmup + compact.DefaultL0Retention + l1
	why := "after the warm-up"
	whyBucket := fmt.Sprintf("after the warm-up + %s of level-0 retention + one level-1 interval", fmtDur(compact.DefaultL0Retention))
	const mib = 1 << 20
	rules := []struct {
		g growth
		v func(Window) float64
	}{
		// RSS gets a tighter ratio than counts do: every buffer, cache and
		// heap headroom is bounded, so once warm it may drift by what the
		// compaction index gains until level-0 retention starts, not more.
		{growth{"RSS", warmup, 1.25, 32 * mib, mib, " MiB", why}, func(w Window) float64 { return float64(w.RSS) }},
		{growth{"descriptors", warmup, 1.5, 64, 1, "", why}, func(w Window) float64 { return float64(w.FDs) }},
		// Connections get the background request budget as slack: the
		// level-1 merge reads recent files from memory until its cache is
		// full, then from the store, up to that budget at once — a step to
		// a plateau the configuration bounds, at any point of a run.
		{growth{"store connections", warmup, 1.5, replica.DefaultBackgroundRequests, 1, "", why}, func(w Window) float64 { return float64(w.StoreConns) }},
		{growth{"objects", settled, 1.5, 500, 1, "", whyBucket}, func(w Window) float64 { return float64(w.Objects) }},
		{growth{"level-0 files", settled, 1.5, 500, 1, "", whyBucket}, func(w Window) float64 { return float64(w.L0Files) }},
	}
	// The backlog's trend slack scales with the shipping rate: a compactor
	// that keeps up holds about one level-1 interval of it.
	rate := medianShipping(windows, warmup)
	backlog := func(w Window) float64 { return float64(w.L0Backlog) }
	rules = append(rules, struct {
		g growth
		v func(Window) float64
	}{growth{"level-0 backlog trend", warmup, 1.5, math.Round(rate * l1.Seconds()), 1, "",
		fmt.Sprintf("after the warm-up; slack: %s of shipping", fmtDur(l1))}, backlog})
	var out []Verdict
	for _, r := range rules {
		out = append(out, r.g.judge(windows, r.v))
	}
	return append(out, ceiling{"level-0 backlog", warmup, 3 * l1, 100}.judge(windows, backlog))
}
