package restore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/restore/restoretest"
)

// After retention dropped the per-transaction files a snapshot and
// compactions cover, ResolvePoint resolves what a restore reaches and
// refuses, with the span available, a point before the oldest snapshot,
// after the newest TXID, inside a merged range, or before the oldest time.
func TestResolvePointAfterRetention(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXIDs 1..16, one second apart from t0
	fs := h.Files
	compactInto(t, store, 9, fs[0:8])  // snapshot 1..8
	compactInto(t, store, 1, fs[8:12]) // 9..12
	var keys []string
	for _, f := range fs[:12] {
		keys = append(keys, f.Key)
	}
	if err := store.Delete(ctx, keys...); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		opts Options
		want ltx.TXID
	}{
		{Options{}, 16},
		{Options{TXID: 8}, 8},
		{Options{TXID: 12}, 12},
		{Options{TXID: 14}, 14},
		{Options{Timestamp: t0.Add(7 * time.Second)}, 8}, // the snapshot's time
		{Options{Timestamp: t0.Add(13*time.Second + 500*time.Millisecond)}, 14}, // between two files
		{Options{Timestamp: t0.Add(10 * time.Second)}, 8},                       // inside the merged 9..12: the newest reachable before
	} {
		got, span, err := ResolvePoint(ctx, store, c.opts)
		if err != nil || got != c.want {
			t.Errorf("%+v: TXID %d, %v; want %d", c.opts, got, err, c.want)
		}
		if span.Oldest != 8 || span.Newest != 16 || !span.OldestTime.Equal(t0.Add(7*time.Second)) || !span.NewestTime.Equal(t0.Add(15*time.Second)) {
			t.Errorf("span %+v, want TXID 8 at t0+7s to TXID 16 at t0+15s", span)
		}
	}
	for _, c := range []struct {
		opts Options
		say  string
	}{
		{Options{TXID: 3}, "before the oldest state retention kept"},
		{Options{TXID: 17}, "after the newest TXID"},
		{Options{TXID: 10}, "inside compacted file"},
		{Options{Timestamp: t0}, "before the oldest state retention kept"},
		{Options{Timestamp: time.Now().Add(time.Hour)}, "in the future"},
	} {
		_, _, err := ResolvePoint(ctx, store, c.opts)
		var pe *PointError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.say) || !strings.Contains(err.Error(), "states available: TXID 8 (") {
			t.Errorf("%+v: %v; want a *PointError saying %q and naming TXIDs 8 to 16", c.opts, err, c.say)
		}
	}
	if _, _, err := ResolvePoint(ctx, newStore(t), Options{TXID: 1}); !errors.Is(err, ErrNoReplica) {
		t.Errorf("an empty replica: %v, want ErrNoReplica", err)
	}
}
