package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// A store that hangs (a lost write quorum, a paused process, a black-holed
// route) answers nothing at all: no error reaches the watch until a request
// gives up, tens of seconds later. So the watch also tracks the requests
// still outstanding (write-path uploads and its own probes, registered with
// Begin): one outstanding past the stall threshold makes the store stalled
// at once, and so does a request that ended by timing out, until the next
// success.
//
// The threshold is configured (SetStallThreshold) or derived from the
// store's own latency: StallFactor times the 99th percentile of the recent
// successful requests, at least MinStallThreshold and at most
// MaxStallThreshold, so a store that is always slow is not called stalled
// for being itself.

const (
	// MinStallThreshold is the derived threshold's floor.
	MinStallThreshold = 2 * time.Second
	// MaxStallThreshold is the derived threshold's ceiling.
	MaxStallThreshold = 60 * time.Second
	// StallFactor multiplies the recent 99th percentile of request latency.
	StallFactor = 4
	// latencySamples is how many recent successful requests the derived
	// threshold looks at.
	latencySamples = 256
)

// SetStallThreshold fixes the stall threshold; d <= 0 derives it from the
// store's latency (the default).
func (w *Watch) SetStallThreshold(d time.Duration) *Watch {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stallFixed = max(d, 0)
	return w
}

// Begin marks a request to the store as outstanding; end says it is over
// and, on success (err nil), records its latency. The outcome itself is
// reported with Observe, as for any request.
func (w *Watch) Begin() (end func(err error)) {
	start := time.Now()
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	if w.outstanding == nil {
		w.outstanding = map[uint64]time.Time{}
	}
	w.outstanding[id] = start
	w.mu.Unlock()
	return func(err error) {
		w.mu.Lock()
		delete(w.outstanding, id)
		if err == errAbandoned {
			w.mu.Unlock()
			return
		}
		if err == nil {
			w.latencies[w.nLat%latencySamples] = time.Since(start)
			w.nLat++
			w.derived = 0 // derived again at the next look, not at every write's
		}
		w.mu.Unlock()
	}
}

// errAbandoned ends a request the caller gave up on itself (shutdown): it
// says nothing about the store.
var errAbandoned = errors.New("abandoned")

// StallThreshold is how long a request may be outstanding before the store
// counts as stalled.
func (w *Watch) StallThreshold() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.thresholdLocked()
}

func (w *Watch) thresholdLocked() time.Duration {
	if w.stallFixed > 0 {
		return w.stallFixed
	}
	if w.derived == 0 {
		w.derived = derive(w.latencies[:min(w.nLat, latencySamples)])
	}
	return w.derived
}

// derive is the threshold for these recent latencies.
func derive(lat []time.Duration) time.Duration {
	if len(lat) == 0 {
		return MinStallThreshold
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	p99 := s[(len(s)-1)*99/100]
	return min(max(StallFactor*p99, MinStallThreshold), MaxStallThreshold)
}

// StalledError says the store is not answering: how long a request has
// waited, or which request timed out.
type StalledError struct {
	Waited    time.Duration // the oldest outstanding request's wait; 0 when Cause is set
	Threshold time.Duration
	Cause     error // a request that ended by timing out, with no success since
}

func (e *StalledError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("the replica store stopped answering: a request timed out (%v) and none has succeeded since", e.Cause)
	}
	return fmt.Sprintf("the replica store is not answering: a request has waited %s, past the stall threshold of %s",
		e.Waited.Round(100*time.Millisecond), e.Threshold.Round(100*time.Millisecond))
}

// Stalled returns a *StalledError while a request has been outstanding past
// the threshold, or since a request timed out until the next success; nil
// otherwise.
func (w *Watch) Stalled() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stalledLocked(time.Now())
}

func (w *Watch) stalledLocked(now time.Time) error {
	th := w.thresholdLocked()
	var oldest time.Time
	for _, t := range w.outstanding {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if !oldest.IsZero() && now.Sub(oldest) > th {
		return &StalledError{Waited: now.Sub(oldest), Threshold: th}
	}
	if w.lastErr != nil && timedOut(w.lastErr) {
		return &StalledError{Threshold: th, Cause: w.lastErr}
	}
	return nil
}

// timedOut reports whether err is a request giving up on a store that did
// not answer (a deadline or a watchdog), as opposed to an answer that was
// an error.
func timedOut(err error) bool {
	return errors.Is(err, replica.ErrStalled) || errors.Is(err, context.DeadlineExceeded)
}
