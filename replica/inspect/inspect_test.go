package inspect_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replica/inspect"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/restore/restoretest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

func TestFileReplica(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	checkReplica(t, store)
}

func TestMinIOReplica(t *testing.T) {
	mn := testenv.MinIO(t)
	store, err := replicaurl.Open(context.Background(), mn.URL(mn.NewBucket(t), "app"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	checkReplica(t, store)
}

// checkReplica ships ten transactions a minute apart, then checks what
// Files and Summarize report against what was shipped, and that every
// restore point they report is one restore accepts.
func checkReplica(t *testing.T, store replica.Store) {
	ctx := context.Background()
	if _, err := inspect.Summarize(ctx, store, 4); !errors.Is(err, inspect.ErrEmpty) {
		t.Fatalf("empty replica: err = %v, want ErrEmpty", err)
	}
	h := restoretest.New(t, store, t.TempDir())
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
	var total int64
	for i := 1; i <= 10; i++ {
		if i > 1 {
			h.Exec("INSERT INTO t (v) VALUES (randomblob(3000))")
		}
		total += h.Ship(t0.Add(time.Duration(i) * time.Minute)).Size
	}
	st, err := os.Stat(h.Path)
	if err != nil {
		t.Fatal(err)
	}

	files, err := inspect.Files(ctx, store, inspect.AllLevels)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 10 {
		t.Fatalf("Files: %d files, want 10", len(files))
	}
	for i, f := range files {
		if f.Level != 0 || f.MinTXID != ltx.TXID(i+1) || f.MaxTXID != ltx.TXID(i+1) || f.Size != h.Files[i].Size {
			t.Fatalf("file %d = %+v, want level 0 TXID %d size %d", i, f, i+1, h.Files[i].Size)
		}
		if time.Since(f.Created) > time.Hour || f.Created.After(time.Now().Add(time.Minute)) {
			t.Fatalf("file %d created %s: not the upload time", i, f.Created)
		}
	}
	if l9, err := inspect.Files(ctx, store, 9); err != nil || len(l9) != 0 {
		t.Fatalf("level 9: %d files, err %v; want none", len(l9), err)
	}

	sum, err := inspect.Summarize(ctx, store, 4)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 10 || sum.Bytes != total || sum.MaxTXID != 10 || !sum.MaxTXIDRestorable || sum.Latest != 10 {
		t.Fatalf("summary %+v: want 10 files, %d bytes, latest TXID 10 restorable", sum, total)
	}
	if sum.DatabaseBytes != st.Size() {
		t.Fatalf("database bytes %d, want the source's size %d", sum.DatabaseBytes, st.Size())
	}
	if want := float64(total) / float64(st.Size()); sum.Footprint != want {
		t.Fatalf("footprint %v, want %v", sum.Footprint, want)
	}
	if len(sum.Levels) != 1 || sum.Levels[0].Files != 10 || sum.Levels[0].MinTXID != 1 || sum.Levels[0].MaxTXID != 10 {
		t.Fatalf("levels %+v", sum.Levels)
	}
	want := []inspect.Range{{First: 1, Last: 10, Points: 10, FirstTime: t0.Add(time.Minute), LastTime: t0.Add(10 * time.Minute)}}
	if !equalRanges(sum.RestoreRanges, want) || !sum.LatestTime.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("restore ranges %+v latest time %s, want %+v", sum.RestoreRanges, sum.LatestTime, want)
	}

	// A lost file in the middle: the points stop before it, and the
	// summary says the newest TXID cannot be rebuilt.
	if err := store.Delete(ctx, h.Files[5].Key); err != nil {
		t.Fatal(err)
	}
	sum, err = inspect.Summarize(ctx, store, 4)
	if err != nil {
		t.Fatal(err)
	}
	if sum.MaxTXIDRestorable || sum.Latest != 5 || sum.MaxTXID != 10 || sum.RestorePoints != 5 {
		t.Fatalf("after losing TXID 6: %+v, want points 1..5 and TXID 10 not restorable", sum)
	}
	for _, r := range sum.RestoreRanges {
		for x := r.First; x <= r.Last; x++ {
			if _, err := restore.Plan(ctx, store, restore.Options{TXID: x}); err != nil {
				t.Fatalf("reported restore point %d: restore plans no chain: %v", x, err)
			}
		}
	}
	if _, err := restore.Plan(ctx, store, restore.Options{TXID: 6}); err == nil {
		t.Fatal("TXID 6 is not reported as a restore point, yet restore plans it")
	}
}

func equalRanges(a, b []inspect.Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].First != b[i].First || a[i].Last != b[i].Last || a[i].Points != b[i].Points ||
			!a[i].FirstTime.Equal(b[i].FirstTime) || !a[i].LastTime.Equal(b[i].LastTime) {
			return false
		}
	}
	return true
}

// RestorePoints agrees with restore's own planner on random replicas mixing
// snapshots, overlapping compactions, per-transaction files and gaps: a TXID
// is a restore point exactly when restore can plan a chain to it.
func TestRestorePointsMatchRestorePlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 300; round++ {
		var files []inspect.File
		var plain []replica.LTXFile
		n := 1 + rng.IntN(12)
		for i := 0; i < n; i++ {
			min := ltx.TXID(1 + rng.IntN(30))
			if rng.IntN(4) == 0 {
				min = 1
			}
			max := min + ltx.TXID(rng.IntN(6))
			level := rng.IntN(3)
			f := inspect.File{Level: level, MinTXID: min, MaxTXID: max, Size: int64(1 + rng.IntN(100))}
			f.Key = replica.LTXKey(level, min, max)
			files = append(files, f)
			plain = append(plain, replica.LTXFile{Level: level, MinTXID: min, MaxTXID: max, Size: f.Size, Key: f.Key})
		}
		points := map[ltx.TXID]bool{}
		for _, p := range inspect.RestorePoints(files) {
			points[p] = true
		}
		for x := ltx.TXID(1); x <= 40; x++ {
			_, err := restore.Chain(plain, x)
			if (err == nil) != points[x] {
				t.Fatalf("round %d, TXID %d: restore plans a chain: %v (err %v), RestorePoints says %v\nfiles: %+v",
					round, x, err == nil, err, points[x], files)
			}
		}
	}
}
