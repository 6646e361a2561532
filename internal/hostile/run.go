package hostile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Attack is one hostile pattern. Run attacks s until it is done or ctx
// ends, reporting every refused request to rec.
type Attack struct {
	Name string
	Run  func(ctx context.Context, s *Server, rec *Recorder) error
}

// Recorder collects what an attack saw: refusals (which must name their
// limit) and notes for the report.
type Recorder struct {
	mu       sync.Mutex
	refused  int
	unclear  int
	examples []string
	notes    []string
}

// Refused records a refused request: it is clear when the status is 4xx or
// 5xx and the body names limit (e.g. "limits.max-response-bytes").
func (r *Recorder) Refused(status int, body, limit string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused++
	if status >= 400 && status <= 599 && strings.Contains(body, limit) {
		return
	}
	r.unclear++
	if len(r.examples) < 3 {
		if len(body) > 300 {
			body = body[:300] + "..."
		}
		r.examples = append(r.examples, fmt.Sprintf("status %d without %q: %s", status, limit, strings.TrimSpace(body)))
	}
}

// RefusedInAnswer records a refusal carried inside a 200 answer, as Hrana
// carries a statement's error in its pipeline's results and a cursor's in
// a step_error entry: it is clear when answer holds an error naming limit.
func (r *Recorder) RefusedInAnswer(answer, limit string) {
	status := http.StatusOK
	if strings.Contains(answer, `"error"`) {
		status = http.StatusBadRequest // an error in the answer: judged as a refusal
	}
	r.Refused(status, answer, limit)
}

// Unclear records a request that should have been refused clearly but was
// not (accepted, or the connection just dropped).
func (r *Recorder) Unclear(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused++
	r.unclear++
	if len(r.examples) < 3 {
		r.examples = append(r.examples, fmt.Sprintf(format, args...))
	}
}

// Notef adds a line to the attack's report.
func (r *Recorder) Notef(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// Budget is what an attack may cost the others.
type Budget struct {
	CanaryP99 time.Duration // default 50ms
	RSS       int64         // peak RSS during the attack, default 512 MiB
	// Settle: how long descriptors and goroutines may take to return to
	// their baseline (plus the slack) after the attack (default 30s).
	Settle         time.Duration
	FDSlack        int // default 3
	GoroutineSlack int // default 10
}

func (b Budget) withDefaults() Budget {
	if b.CanaryP99 == 0 {
		b.CanaryP99 = 50 * time.Millisecond
	}
	if b.RSS == 0 {
		b.RSS = 512 << 20
	}
	if b.Settle == 0 {
		b.Settle = 30 * time.Second
	}
	if b.FDSlack == 0 {
		b.FDSlack = 3
	}
	if b.GoroutineSlack == 0 {
		b.GoroutineSlack = 10
	}
	return b
}

// Result is one attack's outcome.
type Result struct {
	Attack   string
	Err      error // the attack itself failed (not a budget breach)
	Took     time.Duration
	Canary   CanaryStats // during the attack
	Before   Resources
	PeakRSS  int64
	After    Resources // once settled (or when Settle ran out)
	Settled  time.Duration
	Refused  int
	Unclear  int
	Examples []string
	Notes    []string
	Budget   Budget
}

// Problems lists every way the attack broke the budget; empty: it passed.
func (r Result) Problems() []string {
	var p []string
	b := r.Budget
	if r.Err != nil {
		p = append(p, "attack failed: "+r.Err.Error())
	}
	if r.Canary.N == 0 {
		p = append(p, "the canary got no answer during the attack")
	}
	if r.Canary.P99 > b.CanaryP99 {
		p = append(p, fmt.Sprintf("canary p99 %s over %s (%s)", ms(r.Canary.P99), ms(b.CanaryP99), r.Canary))
	}
	if r.Canary.Failures > 0 {
		p = append(p, fmt.Sprintf("canary failed %d times: %s", r.Canary.Failures, r.Canary.LastErr))
	}
	if r.PeakRSS > b.RSS {
		p = append(p, fmt.Sprintf("peak RSS %s over %s", MiB(r.PeakRSS), MiB(b.RSS)))
	}
	if r.After.FDs > r.Before.FDs+b.FDSlack {
		p = append(p, fmt.Sprintf("descriptors %d after, %d before", r.After.FDs, r.Before.FDs))
	}
	if r.Before.Goroutines >= 0 && r.After.Goroutines > r.Before.Goroutines+b.GoroutineSlack {
		p = append(p, fmt.Sprintf("goroutines %d after, %d before", r.After.Goroutines, r.Before.Goroutines))
	}
	if r.After.Goroutines < 0 && r.Before.Goroutines >= 0 {
		p = append(p, "/metrics did not answer after the attack")
	}
	if r.Unclear > 0 {
		p = append(p, fmt.Sprintf("%d of %d refusals did not name their limit: %s", r.Unclear, r.Refused, strings.Join(r.Examples, "; ")))
	}
	return p
}

// Run runs one attack beside the canary: a baseline, the attack while RSS
// is sampled every 20 ms, then a wait (up to Budget.Settle) for descriptors
// and goroutines to return to the baseline.
func Run(ctx context.Context, s *Server, c *Canary, a Attack, b Budget) Result {
	b = b.withDefaults()
	res := Result{Attack: a.Name, Budget: b}
	res.Before = s.Resources(ctx)
	c.Window()
	var peak int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if r := s.ProcResources().RSS; r > peak {
				peak = r
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	rec := &Recorder{}
	start := time.Now()
	res.Err = a.Run(ctx, s, rec)
	res.Took = time.Since(start)
	// A quick attack still gets a window of a second: the canary's answers
	// right after it count (its effects may outlast it).
	sleep(ctx, time.Second-res.Took)
	res.Canary = c.Window()
	close(stopSampling)
	<-sampled
	res.PeakRSS = peak
	res.Refused, res.Unclear, res.Examples, res.Notes = rec.refused, rec.unclear, rec.examples, rec.notes
	settle := time.Now()
	for {
		res.After = s.Resources(ctx)
		ok := res.After.FDs <= res.Before.FDs+b.FDSlack &&
			(res.Before.Goroutines < 0 || (res.After.Goroutines >= 0 && res.After.Goroutines <= res.Before.Goroutines+b.GoroutineSlack))
		if ok || time.Since(settle) > b.Settle || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	res.Settled = time.Since(settle)
	c.Window() // settling is not the attack's window
	return res
}

// Table formats results: attack → canary p50/p99, peak RSS, resources
// before and after, refusals, verdict.
func Table(rs []Result) string {
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "attack\ttook\tcanary p50\tcanary p99\tcanary n/failed\tpeak RSS\tRSS after\tfds before→after\tgoroutines before→after\trefused (unclear)\tverdict")
	for _, r := range rs {
		verdict := "pass"
		if p := r.Problems(); len(p) > 0 {
			verdict = "FAIL: " + strings.Join(p, "; ")
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%d→%d\t%d→%d\t%d (%d)\t%s\n", r.Attack, r.Took.Round(100*time.Millisecond),
			ms(r.Canary.P50), ms(r.Canary.P99), r.Canary.N, r.Canary.Failures, MiB(r.PeakRSS), MiB(r.After.RSS),
			r.Before.FDs, r.After.FDs, r.Before.Goroutines, r.After.Goroutines, r.Refused, r.Unclear, verdict)
	}
	w.Flush()
	for _, r := range rs {
		for _, n := range r.Notes {
			fmt.Fprintf(&sb, "  %s: %s\n", r.Attack, n)
		}
	}
	return sb.String()
}
