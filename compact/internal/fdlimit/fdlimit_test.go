package fdlimit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/compact"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// limit is the soft descriptor limit of this test binary: far below the
// number of level-0 files the test compacts.
const limit = 256

func TestMain(m *testing.M) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Fprintln(os.Stderr, "getrlimit:", err)
		os.Exit(2)
	}
	rl.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func scratch(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir, err := os.MkdirTemp("/dev/shm", "sluice-fdlimit-")
		if err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func TestThousandsOfLevelZeroFilesUnderALowDescriptorLimit(t *testing.T) {
	dir := scratch(t)
	// The limit is really in force: opening more files than it allows fails.
	var held []*os.File
	var openErr error
	for range limit + 10 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			openErr = err
			break
		}
		held = append(held, f)
	}
	for _, f := range held {
		_ = f.Close()
	}
	if !errors.Is(openErr, syscall.EMFILE) {
		t.Fatalf("opened %d files under a limit of %d (err %v): the limit is not in force", len(held), limit, openErr)
	}

	fs, err := file.New(filepath.Join(dir, "replica"))
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, fs, dir)
	h.SkipHashes = true
	h.Script(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000)
		INSERT INTO t (v) SELECT printf('row-%d', i) FROM n;`)
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h.Ship(t0)
	const files = 3000
	for i := 1; i < files; i++ {
		h.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprintf("new-%d", i))
		h.Exec("UPDATE t SET v = v || 'x' WHERE id = ?", 1+(i*37)%1000)
		h.Ship(t0.Add(time.Duration(i) * time.Second))
	}
	h.RecordHash()
	last := h.Pos().TXID

	ctx := context.Background()
	c := compact.New(fs, compact.Config{TempDir: dir}, nil)
	if err := c.CompactOnce(ctx, time.Now()); err != nil {
		t.Fatalf("compaction under a descriptor limit of %d: %v", limit, err)
	}
	l1, err := replica.ListLTX(ctx, fs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(l1) != 1 || l1[0].MinTXID != 2 || l1[0].MaxTXID != last {
		t.Fatalf("level 1 = %v; want one file of TXIDs 2..%s", l1, last)
	}
	// Restore from level 1 (the snapshot the pass also wrote is removed, so
	// the merged file is what gets applied).
	snaps, err := replica.ListLTX(ctx, fs, replica.SnapshotLevel)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if err := fs.Delete(ctx, s.Key); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "restored.db")
	res, err := restore.Restore(ctx, fs, out, restore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || res.Pos.TXID != last {
		t.Fatalf("restore used %v reaching %s; want the first file and the level-1 file reaching %s", res.Files, res.Pos.TXID, last)
	}
	if got := restoretest.FileHash(t, out); got != h.Hashes[last] {
		t.Fatal("restored database differs from the source")
	}
}
