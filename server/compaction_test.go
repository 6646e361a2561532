package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

// hangingStore's reads of LTX files never answer while hang is set, as on a
// store that stopped serving GETs: a compaction pass reading its inputs
// stays in flight until it is cancelled. Uploads (the write path) work.
type hangingStore struct {
	replica.Store
	hang atomic.Bool
}

func (s *hangingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if s.hang.Load() && strings.Contains(key, "ltx/") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

// PutIfAbsent hangs the merge's output too: its inputs, just uploaded,
// are read from memory without a GET.
func (s *hangingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if s.hang.Load() && strings.Contains(key, "ltx/1/") {
		<-ctx.Done()
		return replica.ObjectInfo{}, ctx.Err()
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// Databases closed for being idle hand their level-0 files to the shared
// scheduler, which folds them into level 1 afterwards; the close itself
// does not merge.
func TestIdleDatabasesAreCompactedAfterClosing(t *testing.T) {
	s, ts, store := newTestServer(t, func(c *Config) {
		c.Compaction.Disabled = false
		c.Limits.DatabaseIdleTimeout = Duration(300 * time.Millisecond)
	})
	names := []string{"a", "b", "c"}
	for _, name := range names {
		expect(t, do(t, "PUT", ts.URL+"/v1/databases/"+name, "", ""), 201)
		expect(t, query(t, ts.URL, name, "", `{"sql":"CREATE TABLE t(x)"}`), 200)
		for i := 0; i < 6; i++ {
			expect(t, query(t, ts.URL, name, "", fmt.Sprintf(`{"sql":"INSERT INTO t VALUES (%d)"}`, i)), 200)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := 0
		for _, name := range names {
			levels, err := replica.ListAllLTX(context.Background(), replica.Sub(store, name))
			if err != nil {
				t.Fatal(err)
			}
			var l0, l1 ltx.TXID
			for _, f := range levels[0] {
				l0 = max(l0, f.MaxTXID)
			}
			for _, f := range levels[1] {
				l1 = max(l1, f.MaxTXID)
			}
			if l0 > 0 && l1 == l0 {
				done++
			}
		}
		st := s.compact.sched.Stats()
		if done == len(names) && st.Compactors == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d idle databases have level 1 up to their newest TXID; scheduler %+v", done, len(names), st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shutdown cancels a compaction in flight instead of waiting for it (here a
// pass stuck on a store that stopped answering reads and level-1 writes),
// and merges nothing on the way out.
func TestShutdownCancelsCompactionInsteadOfWaiting(t *testing.T) {
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hs := &hangingStore{Store: fs}
	hs.hang.Store(true)
	cfg := Defaults()
	cfg.DataDir = t.TempDir()
	logger := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewWithStore(cfg, hs, logger, "test")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	expect(t, do(t, "PUT", ts.URL+"/v1/databases/a", "", ""), 201)
	expect(t, query(t, ts.URL, "a", "", `{"sql":"CREATE TABLE t(x)"}`), 200)
	for i := 0; i < 5; i++ {
		expect(t, query(t, ts.URL, "a", "", fmt.Sprintf(`{"sql":"INSERT INTO t VALUES (%d)"}`, i)), 200)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.compact.sched.Stats().Running == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no compaction pass started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %s with a compaction pass in flight; want it cancelled", d)
	}
	levels, err := replica.ListAllLTX(context.Background(), replica.Sub(fs, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(levels[1]) != 0 || len(levels[0]) < 6 {
		t.Fatalf("after shutdown: %d level-0 and %d level-1 files; want every write in level 0 and no merge", len(levels[0]), len(levels[1]))
	}
}

// /metrics shows the scheduler's backlog and the passes it ran.
func TestCompactionMetrics(t *testing.T) {
	_, ts, _ := newTestServer(t, func(c *Config) { c.Compaction.Disabled = false })
	expect(t, do(t, "PUT", ts.URL+"/v1/databases/m", "", ""), 201)
	expect(t, query(t, ts.URL, "m", "", `{"sql":"CREATE TABLE t(x)"}`), 200)
	deadline := time.Now().Add(30 * time.Second)
	for {
		body := string(do(t, "GET", ts.URL+"/metrics", "", "").body)
		if strings.Contains(body, "sluice_compaction_backlog_files") && strings.Contains(body, `sluice_compaction_pass_seconds_count{result="ok"}`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no compaction pass in /metrics after 30s:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
