package soak

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// A soak cannot watch a server forever, so "grows without bound" has to be
// decided from minutes of samples. Two rules, both printed with the figures
// they compared:
//
//   - growth (RSS, descriptors, store connections, objects, level-0 files):
//     once the resource is expected to have settled (From), split the
//     remaining windows into thirds; the resource grows without bound if the
//     last third's peak exceeds Ratio × the first third's peak + Slack. A
//     bounded resource plateaus, so its late peak stays near its early one;
//     one that leaks keeps climbing and the late peak runs away.
//   - ceiling (level-0 backlog): level-0 files not yet in level 1 must never
//     exceed the files shipped in the Span before + Slack. A compactor that
//     keeps up holds about one level-1 interval's worth; one that stalls
//     falls behind by more every window, whatever the early windows looked
//     like. The backlog also gets the
//     growth rule, its slack one level-1 interval of shipping, to catch a
//     compactor that falls behind slowly.

// growth is the rule for one resource that must plateau.
type growth struct {
	Resource string
	From     time.Duration // windows ending before this are left out
	Ratio    float64
	Slack    float64
	Unit     float64 // divides values for printing (1 or MiB)
	UnitName string
	Why      string // why From is where it is
}

// Verdict is one rule's outcome.
type Verdict struct {
	Resource string  `json:"resource"`
	Rule     string  `json:"rule"`
	Judged   bool    `json:"judged"`
	OK       bool    `json:"ok"`
	Early    float64 `json:"early_peak,omitempty"` // first third's peak (growth)
	Late     float64 `json:"late_peak"`            // last third's peak (growth), highest value (ceiling)
	Limit    float64 `json:"limit"`
	Window   int     `json:"window,omitempty"` // the window holding Late
	Detail   string  `json:"detail"`           // one line: the comparison, or why it was not judged
}

func (g growth) rule() string {
	return fmt.Sprintf("from %s on, last third's peak <= %s x first third's peak + %s%s (%s)",
		fmtDur(g.From), strconv.FormatFloat(g.Ratio, 'f', -1, 64), trimFloat(g.Slack/g.Unit), g.UnitName, g.Why)
}

// judge applies the rule to values[i], the peak of windows[i].
func (g growth) judge(windows []Window, value func(Window) float64) Verdict {
	v := Verdict{Resource: g.Resource, Rule: g.rule()}
	var idx []int
	for i, w := range windows {
		if !w.Partial && w.End >= g.From+windowOf(windows) {
			idx = append(idx, i)
		}
	}
	if len(idx) < 3 {
		v.OK = true
		v.Detail = fmt.Sprintf("not judged: %d full windows after %s, 3 needed (a longer -duration judges it)", len(idx), fmtDur(g.From))
		return v
	}
	third := len(idx) / 3
	for _, i := range idx[:third] {
		v.Early = max(v.Early, value(windows[i]))
	}
	for _, i := range idx[len(idx)-third:] {
		if x := value(windows[i]); x >= v.Late {
			v.Late, v.Window = x, windows[i].Index
		}
	}
	v.Judged = true
	v.Limit = g.Ratio*v.Early + g.Slack
	v.OK = v.Late <= v.Limit
	u := func(x float64) string { return trimFloat(x/g.Unit) + g.UnitName }
	v.Detail = fmt.Sprintf("first third (%d windows) peak %s, last third peak %s (window %d), limit %s",
		third, u(v.Early), u(v.Late), v.Window, u(v.Limit))
	return v
}

// ceiling is the level-0 backlog's rule: compaction must cover every
// level-0 file older than Span, so a window's backlog may not exceed the
// files shipped during the Span before its end, + Slack. It does not depend
// on the shipping rate staying steady: a backlog built up fast and compacted
// slowly while writes slow down still counts against what was shipped.
type ceiling struct {
	Resource string
	From     time.Duration
	Span     time.Duration
	Slack    float64
}

func (c ceiling) rule() string {
	return fmt.Sprintf("from %s on, every window <= the level-0 files shipped in the %s before its end + %s (compaction covers every file older than that)",
		fmtDur(c.From), fmtDur(c.Span), trimFloat(c.Slack))
}

// judge reports the window whose backlog is furthest above (or closest to)
// its limit.
func (c ceiling) judge(windows []Window, value func(Window) float64) Verdict {
	v := Verdict{Resource: c.Resource, Rule: c.rule()}
	win := windowOf(windows)
	worst := math.Inf(-1)
	for i, w := range windows {
		if w.Partial || w.End < c.From+win {
			continue
		}
		var shipped float64
		for j := i; j >= 0 && windows[j].End > w.End-c.Span; j-- {
			shipped += float64(windows[j].Shipped)
		}
		limit := shipped + c.Slack
		if x := value(w); x-limit > worst {
			worst, v.Late, v.Limit, v.Window = x-limit, x, limit, w.Index
		}
		v.Judged = true
	}
	if !v.Judged {
		v.OK = true
		v.Detail = fmt.Sprintf("not judged: no full window after %s", fmtDur(c.From))
		return v
	}
	v.OK = v.Late <= v.Limit
	v.Detail = fmt.Sprintf("closest window %d: backlog %s, limit %s (shipped in the %s before it + %s)",
		v.Window, trimFloat(v.Late), trimFloat(v.Limit), fmtDur(c.Span), trimFloat(c.Slack))
	return v
}

// medianShipping is the median rate, in level-0 files per second, at which
// the full windows from from on shipped.
func medianShipping(windows []Window, from time.Duration) float64 {
	win := windowOf(windows)
	var rates []float64
	for _, w := range windows {
		if !w.Partial && w.End >= from+win {
			rates = append(rates, float64(w.Shipped)/win.Seconds())
		}
	}
	if len(rates) == 0 {
		return 0
	}
	sort.Float64s(rates)
	return rates[len(rates)/2]
}

// windowOf is the length of the run's windows (the first one's end).
func windowOf(windows []Window) time.Duration {
	if len(windows) == 0 {
		return time.Second
	}
	return windows[0].End
}

func trimFloat(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprintf("%.1f", x)
}

// fmtDur prints 90s as 1m30s and 60s as 1m (not 1m0s).
func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	default:
		return fmt.Sprintf("%dm%ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	}
}
