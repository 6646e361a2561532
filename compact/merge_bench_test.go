package compact

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicedb/sluice/restore/restoretest"
)

// BenchmarkMergeSnapshot is the heaviest merge a compactor does: a snapshot
// of 60,000 rows (~2.3 MB of LTX) folded with 100 level-0 files (one insert and every
// other one an update each) into a new snapshot. With the default fan-in of
// 32 it takes two rounds through intermediate scratch files.
func BenchmarkMergeSnapshot(b *testing.B) {
	fs, _ := newStore(b)
	h := restoretest.New(b, fs, fastTempDir(b))
	h.SkipHashes = true
	seedDB(h, 60000)
	h.Ship(t0)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100 {
		writeOnce(h, rng, i)
		h.Ship(t0.Add(time.Duration(i+1) * time.Second))
	}
	c := New(fs, Config{TempDir: fastTempDir(b)}, nil)
	ctx := context.Background()
	var size int64
	for b.Loop() {
		out, n, hdr, err := c.merge(ctx, h.Files)
		if err != nil {
			b.Fatal(err)
		}
		if hdr.MinTXID != 1 || hdr.MaxTXID != h.Pos().TXID {
			b.Fatalf("merged TXIDs %s..%s, want 1..%s", hdr.MinTXID, hdr.MaxTXID, h.Pos().TXID)
		}
		removeTemp(out)
		size = n
	}
	var in int64
	for _, f := range h.Files {
		in += f.Size
	}
	b.SetBytes(in)
	b.ReportMetric(float64(size), "out-bytes")
}
