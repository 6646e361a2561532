package restore

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// The newest files past a TXID that never landed are uploads in flight of
// a writer that stopped without releasing its lease (never acknowledged):
// under that lease the restore stops exactly before the gap, and says so.
// Without a lease, or after a release (the holder shipped in order before
// letting go), the same gap is damage and the restore fails naming it.
func TestRestoreStopsBeforeUploadsInFlightOnlyUnderAnOpenLease(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h)
	last := len(h.Files) - 1
	missing := h.Files[last-1] // the newest file stays, past the gap
	if err := store.Delete(ctx, missing.Key); err != nil {
		t.Fatal(err)
	}
	gapErr := func(what string) {
		t.Helper()
		out, _, err := restoreTo(t, store, Options{})
		if err == nil || !strings.Contains(err.Error(), "missing TXIDs") {
			t.Fatalf("%s: want a gap error, got %v", what, err)
		}
		wantNoOutput(t, out)
	}
	gapErr("no lease")

	lease := func(expires time.Time) {
		t.Helper()
		b := []byte(`{"holder":"a","epoch":1,"expires":"` + expires.UTC().Format(time.RFC3339Nano) + `"}`)
		if _, err := store.Put(ctx, replica.SluiceDir+"/lease", bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	lease(time.Now().Add(-time.Minute)) // expired, never released: the writer crashed
	out, res, err := restoreTo(t, store, Options{})
	if err != nil {
		t.Fatalf("restore under an unreleased lease: %v", err)
	}
	if res.Pos.TXID != missing.MinTXID-1 {
		t.Fatalf("restored TXID %d, want %d (the end before the gap)", res.Pos.TXID, missing.MinTXID-1)
	}
	wantExact(t, h, out, missing.MinTXID-1)

	lease(time.Unix(1, 0)) // released
	gapErr("released lease")
}
