package boundedtest

import (
	"context"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/s3"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/restore/restoretest"
)

func openS3(t *testing.T, rawURL string) replica.Store {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	s, err := s3.OpenURL(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A burst left thousands of level-0 files in MinIO.
//
// First, while a compaction of that backlog runs against a slow store (every
// read of an object body is delayed, so the merge holds its connections),
// another database of the same process ships through the same S3 client and
// every write is acknowledged; cancelling the compaction stops it promptly.
//
// Then a normal pass merges the backlog into level 1 while never holding more
// than FanIn object bodies open, and the result restores to exactly the
// source database.
func TestLevelZeroBacklogInMinIO(t *testing.T) {
	h := buildHistory(t)
	mn := testenv.MinIO(t)
	bucket := mn.NewBucket(t)
	store := openS3(t, mn.URL(bucket, "db"))
	start := time.Now()
	copyFiles(t, h, store)
	t.Logf("copied %d level-0 files to MinIO in %s", len(h.files), time.Since(start).Round(time.Millisecond))

	t.Run("ShippingIsAcknowledgedWhileASlowCompactionRuns", func(t *testing.T) {
		shipWhileSlowCompaction(t, mn.URL(bucket, "other"), store)
	})
	if t.Failed() {
		return
	}
	ctx := context.Background()
	counter := &openCounter{Store: store}
	const fanIn = 32
	c := compact.New(counter, compact.Config{FanIn: fanIn, Budget: replica.NewBudget(64), TempDir: t.TempDir()}, nil)
	start = time.Now()
	if err := c.CompactOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	t.Logf("compaction pass took %s", time.Since(start).Round(time.Millisecond))
	if peak := counter.peak.Load(); peak > fanIn || peak < 2 {
		t.Errorf("peak open inputs = %d; want between 2 and the fan-in bound %d", peak, fanIn)
	}
	if n := counter.open.Load(); n != 0 {
		t.Errorf("%d object bodies still open after the pass", n)
	}
	if got := counter.gets.Load(); got < levelZeroFiles-1 {
		t.Errorf("the pass read %d objects; want every one of the %d level-0 inputs", got, levelZeroFiles-1)
	}
	l1, err := replica.ListLTX(ctx, store, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(l1) != 1 || l1[0].MinTXID != 2 || l1[0].MaxTXID != h.last {
		t.Fatalf("level 1 = %v; want one file of TXIDs 2..%s", l1, h.last)
	}
	t.Logf("peak open inputs %d, %d reads, level 1 = %s (%d bytes)", counter.peak.Load(), counter.gets.Load(), l1[0].Key, l1[0].Size)

	// Restore from the snapshot the pass also wrote, then from level 1 alone
	// (over the first level-0 file): both must be the source, byte for byte.
	check := func(what string, wantFiles int) {
		out := filepath.Join(t.TempDir(), "restored.db")
		res, err := restore.Restore(ctx, store, out, restore.Options{})
		if err != nil {
			t.Fatalf("restore %s: %v", what, err)
		}
		if len(res.Files) != wantFiles || res.Pos.TXID != h.last {
			t.Fatalf("restore %s used %v reaching %s; want %d files reaching %s", what, res.Files, res.Pos.TXID, wantFiles, h.last)
		}
		if got := restoretest.FileHash(t, out); got != h.hash {
			t.Fatalf("restore %s: database differs from the source", what)
		}
	}
	check("from the snapshot", 1)
	snaps, err := replica.ListLTX(ctx, store, replica.SnapshotLevel)
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots = %v, %v; want one", snaps, err)
	}
	if err := store.Delete(ctx, snaps[0].Key); err != nil {
		t.Fatal(err)
	}
	check("from level 1", 2)
}
