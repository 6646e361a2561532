package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A burst of WAL far larger than the spool's memory bound is captured in
// memory that does not follow the burst: capture keeps frame offsets, not
// pages, and the encoded file spills to disk past spoolMemory.
func TestCaptureMemoryDoesNotFollowTheBurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	a.exec("PRAGMA wal_autocheckpoint=0")
	// Incompressible rows (~8 MiB of pages), rewritten in place by each
	// round of the burst: the WAL grows, the set of pages does not. (Fewer
	// under the race detector, which slows the pure-Go SQLite fifty-fold.)
	rows := 2000
	if raceEnabled {
		rows = 150
	}
	a.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
		INSERT INTO t(v) SELECT randomblob(3000) FROM n`, rows)
	store := newStore(t)
	db := openDB(t, path, store, Options{CheckpointPages: 1 << 30})

	burst := func(rounds int) (walMiB, allocMiB float64) {
		walBefore, err := fileSize(path + "-wal")
		must(t, err)
		for i := 0; i < rounds; i++ {
			a.exec("UPDATE t SET v = randomblob(3000)")
		}
		walAfter, err := fileSize(path + "-wal")
		must(t, err)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		sync1(t, db)
		runtime.ReadMemStats(&after)
		return float64(walAfter-walBefore) / (1 << 20), float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	}
	smallWAL, small := burst(1)
	bigWAL, big := burst(10)
	t.Logf("a %.0f MiB burst of WAL: capture allocated %.1f MiB; a %.0f MiB burst: %.1f MiB", smallWAL, small, bigWAL, big)
	// Copying pages would allocate at least the burst.
	if bigWAL < 8*smallWAL || big > 1.5*small+min(2, bigWAL/4) {
		t.Errorf("capturing %.0f MiB of WAL allocated %.1f MiB, %.0f MiB allocated %.1f MiB; want the same bound for both", smallWAL, small, bigWAL, big)
	}
	must(t, db.Close(t.Context()))
	assertReplicaEquals(t, store, path)
	if st := db.Stats(); st.FullReads != 0 {
		t.Errorf("%d full reads", st.FullReads)
	}
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// The spool gives back exactly what was written, below and past its memory
// bound (where it moves to a temporary file).
func TestSpoolSpillsToDiskAndReadsBack(t *testing.T) {
	want := make([]byte, spoolMemory+spoolMemory/2)
	for i := range want {
		want[i] = byte(i*7 + i/4096)
	}
	s := newSpool(t.TempDir(), "app.db")
	defer s.close()
	for off, k := 0, 1; off < len(want); k = k*3%70001 + 1 {
		end := min(off+k, len(want))
		if _, err := s.Write(want[off:end]); err != nil {
			t.Fatal(err)
		}
		if end <= spoolMemory && s.f != nil {
			t.Fatal("spilled to disk before the memory bound")
		}
		off = end
	}
	// Below the bound, the same reads come from memory chunks.
	small := newSpool(t.TempDir(), "app.db")
	defer small.close()
	_, err := small.Write(want[:300<<10])
	must(t, err)
	must(t, small.finish())
	same, err := sameBytes(small.reader(), bytes.NewReader(want[:300<<10]))
	must(t, err)
	if small.f != nil || !same {
		t.Fatal("a small spool went to disk or reads back differently")
	}
	must(t, s.finish())
	if s.f == nil {
		t.Fatal("did not spill to disk past the memory bound")
	}
	entries, err := os.ReadDir(s.dir)
	must(t, err)
	if len(entries) != 0 {
		t.Fatalf("the spool file is visible in %s: %v", s.dir, entries[0].Name())
	}
	same, err = sameBytes(s.reader(), bytes.NewReader(want))
	must(t, err)
	shifted, err := sameBytes(s.reader(), bytes.NewReader(want[1:]))
	must(t, err)
	if !same || shifted {
		t.Fatal("spool content differs from what was written")
	}
}
