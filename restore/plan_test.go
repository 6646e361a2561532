package restore

import (
	"strings"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

func lf(level int, min, max ltx.TXID) replica.LTXFile {
	return replica.LTXFile{Level: level, MinTXID: min, MaxTXID: max, Size: int64(max-min+1) * 100, Key: replica.LTXKey(level, min, max)}
}

func l0s(from, to ltx.TXID) []replica.LTXFile {
	var fs []replica.LTXFile
	for i := from; i <= to; i++ {
		fs = append(fs, lf(0, i, i))
	}
	return fs
}

func keysOf(fs []replica.LTXFile) string {
	var ks []string
	for _, f := range fs {
		ks = append(ks, f.Key)
	}
	return strings.Join(ks, " ")
}

func wantPlan(t *testing.T, files []replica.LTXFile, target ltx.TXID, want ...replica.LTXFile) {
	t.Helper()
	got, err := Chain(files, target)
	if err != nil {
		t.Fatalf("target %d: %v", target, err)
	}
	if keysOf(got) != keysOf(want) {
		t.Fatalf("target %d:\n got %s\nwant %s", target, keysOf(got), keysOf(want))
	}
}

func wantPlanError(t *testing.T, files []replica.LTXFile, target ltx.TXID, substrs ...string) {
	t.Helper()
	got, err := Chain(files, target)
	if err == nil {
		t.Fatalf("target %d: want an error, got plan %s", target, keysOf(got))
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("target %d: error %q does not mention %q", target, err, s)
		}
	}
}

func TestPlanPicksNewestSnapshotAtOrBeforeTarget(t *testing.T) {
	files := append([]replica.LTXFile{lf(9, 1, 10), lf(9, 1, 20)}, l0s(11, 25)...)
	wantPlan(t, files, 0, append([]replica.LTXFile{lf(9, 1, 20)}, l0s(21, 25)...)...)
	wantPlan(t, files, 20, lf(9, 1, 20))
	wantPlan(t, files, 15, append([]replica.LTXFile{lf(9, 1, 10)}, l0s(11, 15)...)...)
	wantPlan(t, files, 10, lf(9, 1, 10))
	wantPlanError(t, files, 5, "predates the oldest snapshot", replica.LTXKey(9, 1, 10))
}

func TestPlanWithoutSnapshotStartsFromTXID1AtAnyLevel(t *testing.T) {
	files := append([]replica.LTXFile{lf(1, 1, 8)}, l0s(1, 12)...)
	wantPlan(t, files, 0, append([]replica.LTXFile{lf(1, 1, 8)}, l0s(9, 12)...)...)
	wantPlan(t, files, 3, l0s(1, 3)...)
	wantPlanError(t, l0s(5, 9), 0, "no snapshot", "TXID 0000000000000005")
}

func TestPlanCrossesLevelsWithFewestFiles(t *testing.T) {
	files := []replica.LTXFile{lf(9, 1, 50), lf(2, 51, 80)}
	files = append(files, lf(1, 51, 60), lf(1, 61, 70), lf(1, 71, 80), lf(1, 81, 90))
	files = append(files, l0s(71, 95)...)
	wantPlan(t, files, 0, append([]replica.LTXFile{lf(9, 1, 50), lf(2, 51, 80), lf(1, 81, 90)}, l0s(91, 95)...)...)
	wantPlan(t, files, 75, lf(9, 1, 50), lf(1, 51, 60), lf(1, 61, 70), lf(0, 71, 71), lf(0, 72, 72), lf(0, 73, 73), lf(0, 74, 74), lf(0, 75, 75))
	wantPlan(t, files, 80, lf(9, 1, 50), lf(2, 51, 80))
}

func TestPlanAcceptsOverlappingFiles(t *testing.T) {
	// Litestream's compacted levels need not share boundaries.
	files := []replica.LTXFile{lf(9, 1, 50), lf(1, 40, 70), lf(0, 71, 71), lf(0, 72, 72)}
	wantPlan(t, files, 0, files...)
	// A file reaching further wins even if it overlaps more.
	files = []replica.LTXFile{lf(9, 1, 50), lf(1, 51, 60), lf(2, 45, 65)}
	wantPlan(t, files, 0, lf(9, 1, 50), lf(2, 45, 65))
}

func TestPlanTieBreaksOnExactContinuationThenSize(t *testing.T) {
	exact := lf(1, 11, 20)
	overlapping := lf(2, 5, 20)
	files := []replica.LTXFile{lf(9, 1, 10), overlapping, exact}
	wantPlan(t, files, 0, lf(9, 1, 10), exact)
	small, big := lf(0, 11, 20), lf(1, 11, 20)
	small.Size, big.Size = 10, 1000
	wantPlan(t, []replica.LTXFile{lf(9, 1, 10), big, small}, 0, lf(9, 1, 10), small)
}

func TestPlanTXIDInsideCompactedFileNamesNeighbours(t *testing.T) {
	files := []replica.LTXFile{lf(9, 1, 50), lf(1, 51, 60), lf(0, 61, 61)}
	wantPlanError(t, files, 55, "inside compacted file", replica.LTXKey(1, 51, 60), "(50)", "(60)")
}

func TestPlanGapNamesLastTXIDAndMissingRange(t *testing.T) {
	files := append([]replica.LTXFile{lf(9, 1, 10)}, lf(0, 11, 11), lf(0, 12, 12), lf(0, 15, 15), lf(0, 16, 16))
	wantPlanError(t, files, 0, "chain reaches TXID 000000000000000c (12)", "missing TXIDs 000000000000000d..000000000000000e (13..14)")
	wantPlan(t, files, 12, lf(9, 1, 10), lf(0, 11, 11), lf(0, 12, 12))
	wantPlanError(t, files, 16, "(13..14)")
}

func TestPlanTargetPastNewestIsAnError(t *testing.T) {
	wantPlanError(t, []replica.LTXFile{lf(9, 1, 10)}, 11, "past the newest TXID", "(10)")
}
