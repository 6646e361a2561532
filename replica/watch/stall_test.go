package watch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// A request outstanding past the threshold makes the store stalled and not
// ready while it waits; its success makes it ready again at once.
func TestOutstandingRequestPastThresholdIsAStall(t *testing.T) {
	w := New(nil, time.Minute).SetStallThreshold(50 * time.Millisecond)
	w.Observe(nil)
	end := w.Begin()
	if err := w.Stalled(); err != nil || !w.Status().Ready {
		t.Fatalf("stalled at once: %v", err)
	}
	time.Sleep(80 * time.Millisecond)
	var se *StalledError
	if err := w.Stalled(); !errors.As(err, &se) || se.Waited < 50*time.Millisecond {
		t.Fatalf("Stalled() = %v after 80ms outstanding, want a StalledError", err)
	}
	if st := w.Status(); st.Ready || st.LastErr == nil {
		t.Fatalf("ready while a request is stalled: %+v", st)
	}
	end(nil)
	w.Observe(nil)
	if err := w.Stalled(); err != nil || !w.Status().Ready {
		t.Fatalf("still stalled after the request succeeded: %v", err)
	}
}

// A request that gave up waiting keeps the store stalled until a success;
// an answer that is an error is not a stall.
func TestTimedOutRequestStallsUntilASuccess(t *testing.T) {
	w := New(nil, time.Minute)
	request(w, fmt.Errorf("upload: %w", replica.ErrStalled))
	if w.Stalled() == nil {
		t.Fatal("a watchdog timeout is not a stall")
	}
	request(w, nil)
	if err := w.Stalled(); err != nil {
		t.Fatalf("stalled after a success: %v", err)
	}
	request(w, fmt.Errorf("probe: %w", context.DeadlineExceeded))
	if w.Stalled() == nil {
		t.Fatal("a deadline is not a stall")
	}
	w.Observe(nil)
	request(w, errors.New("403 access denied"))
	if err := w.Stalled(); err != nil {
		t.Fatalf("an error answer counted as a stall: %v", err)
	}
}

// The derived threshold follows the store's latency: the floor for a fast
// store, four times its 99th percentile for a slow one, capped.
func TestDerivedThresholdFollowsLatency(t *testing.T) {
	w := New(nil, time.Minute)
	if got := w.StallThreshold(); got != MinStallThreshold {
		t.Fatalf("threshold with no samples %s, want %s", got, MinStallThreshold)
	}
	set := func(ds ...time.Duration) {
		w.mu.Lock()
		w.nLat, w.derived = 0, 0
		for _, d := range ds {
			w.latencies[w.nLat%latencySamples] = d
			w.nLat++
		}
		w.mu.Unlock()
	}
	fast := make([]time.Duration, 200)
	for i := range fast {
		fast[i] = 20 * time.Millisecond
	}
	set(fast...)
	if got := w.StallThreshold(); got != MinStallThreshold {
		t.Fatalf("fast store: threshold %s, want the floor %s", got, MinStallThreshold)
	}
	slow := append([]time.Duration{}, fast...)
	for i := range 10 { // 5% of requests take 3s: the p99 is 3s
		slow[i] = 3 * time.Second
	}
	set(slow...)
	if got := w.StallThreshold(); got != 12*time.Second {
		t.Fatalf("slow store: threshold %s, want 12s", got)
	}
	set(time.Minute)
	if got := w.StallThreshold(); got != MaxStallThreshold {
		t.Fatalf("very slow store: threshold %s, want the cap %s", got, MaxStallThreshold)
	}
	w.SetStallThreshold(700 * time.Millisecond)
	if got := w.StallThreshold(); got != 700*time.Millisecond {
		t.Fatalf("configured threshold %s, want 700ms", got)
	}
}

// request is one request to the store, as a caller reports it.
func request(w *Watch, err error) {
	w.Begin()(err)
	w.Observe(err)
}
