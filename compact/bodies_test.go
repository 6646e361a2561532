package compact

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// shipWithBodies ships n small commits and announces each with its bytes,
// as the capture does, and returns the bytes shipped.
func shipWithBodies(t *testing.T, h *restoretest.History, fs replica.Store, c *Compactor, n int, now time.Time) int64 {
	var total int64
	for i := 0; i < n; i++ {
		h.Exec(fmt.Sprintf("INSERT INTO t (v) VALUES ('row %d')", i))
		f := h.Ship(now)
		body := readAll(t, fs, f.Key)
		total += int64(len(body))
		c.NotifyBody(f, body)
	}
	return total
}

// The level-1 merge reads files this process just uploaded from memory:
// no GET for them, and the result restores exactly.
func TestLevelOneMergeReadsShippedFilesFromMemory(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	h.Exec("CREATE TABLE t (v TEXT)")
	bodies := NewBodyCache(1<<20, time.Minute)
	c := New(store, Config{Bodies: bodies}, nil)
	h.Ship(t0) // the snapshot (level 0's first file) goes to level 9, not level 1
	if err := c.CompactOnce(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	shipWithBodies(t, h, fs, c, 20, t0)
	gets := store.snapshot()["Get"]
	if err := c.CompactOnce(context.Background(), t0.Add(31*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().PerLevel[1]; n != 1 {
		t.Fatalf("%d level-1 files, want 1", n)
	}
	if extra := store.snapshot()["Get"] - gets; extra != 0 {
		t.Fatalf("the merge made %d GETs for files it had in memory", extra)
	}
	if st := bodies.Stats(); st.Hits != 20 || st.Files != 0 || st.Bytes != 0 {
		t.Fatalf("cache after the merge: %+v, want 20 hits and nothing left", st)
	}
	assertLatestRestored(t, fs, h, "after a merge from memory")
}

// A full cache keeps the oldest files and refuses newer ones; the merge gets
// those from the store, and Close forgets what a stopped compactor left.
func TestFullBodyCacheFallsBackToTheStore(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	h.Exec("CREATE TABLE t (v TEXT)")
	h.Ship(t0)
	probe := NewBodyCache(1<<20, time.Minute)
	c := New(store, Config{Bodies: probe}, nil)
	if err := c.CompactOnce(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	size := shipWithBodies(t, h, fs, c, 1, t0)
	c.Close()
	if st := probe.Stats(); st.Files != 0 {
		t.Fatalf("Close left %d files in the cache", st.Files)
	}

	bodies := NewBodyCache(5*size, time.Minute) // room for about 5 files
	c = New(store, Config{Bodies: bodies}, nil)
	if err := c.CompactOnce(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	shipWithBodies(t, h, fs, c, 20, t0)
	if st := bodies.Stats(); st.Files == 0 || st.Files >= 20 || st.Bytes > 5*size {
		t.Fatalf("bounded cache holds %d files, %d bytes (bound %d)", st.Files, st.Bytes, 5*size)
	}
	gets := store.snapshot()["Get"]
	if err := c.CompactOnce(context.Background(), t0.Add(31*time.Second)); err != nil {
		t.Fatal(err)
	}
	st := bodies.Stats()
	if extra := store.snapshot()["Get"] - gets; int64(extra)+st.Hits < 20 || st.Hits == 0 {
		t.Fatalf("%d GETs and %d files from memory for 20 inputs", extra, st.Hits)
	}
	assertLatestRestored(t, fs, h, "")
}
