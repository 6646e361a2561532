package server

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore"
)

// A full disk under the data directory: writes fail with SQLite's own
// SQLITE_FULL and commit nothing, reads and /health go on, writes resume
// once there is room, and the replica holds exactly the acknowledged rows.
func TestServeDiskFullRefusesWritesThenRecovers(t *testing.T) {
	disk, resize := testenv.SmallDisk(t, "4m")
	replicaDir := t.TempDir()
	bin := buildSluice(t)
	p := startServe(t, bin, nil, "-data", filepath.Join(disk, "data"), "-replica", "file://"+replicaDir)
	if code, body, err := post(p.base, "default", `{"sql":"CREATE TABLE t(id INTEGER PRIMARY KEY, w INTEGER, json TEXT)"}`); err != nil || code != 200 {
		t.Fatalf("create table: %d %s %v", code, body, err)
	}
	insert := func(id int) (int, string) {
		code, body, err := post(p.base, "default", fmt.Sprintf(`{"sql":"INSERT INTO t VALUES (%d, 0, hex(randomblob(1000)))"}`, id))
		if err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
		return code, body
	}
	acked := map[int]bool{}
	failures := 0
	id := 0
	for ; failures < 20 && id < 20_000; id++ {
		code, body := insert(id)
		if code == 200 {
			acked[id] = true
			continue
		}
		failures++
		if !strings.Contains(body, `"SQLITE_FULL`) || !strings.Contains(body, "disk is full") {
			t.Fatalf("write on a full disk answered %d %s; want SQLite's SQLITE_FULL", code, body)
		}
	}
	if failures == 0 || len(acked) < 100 {
		t.Fatalf("%d writes acknowledged, %d refused: the disk never filled\n%s", len(acked), failures, p.log.String())
	}
	if code, body, err := post(p.base, "default", `{"sql":"SELECT count(*) FROM t"}`); err != nil || code != 200 ||
		!strings.Contains(body, fmt.Sprintf(`"rows":[[%d]]`, len(acked))) {
		t.Fatalf("read on a full disk: %d %s %v (want %d rows)", code, body, err, len(acked))
	}

	// Retried at every upload, a failing checkpoint must not flood the log
	// (which may well be on the full disk).
	time.Sleep(1500 * time.Millisecond)
	if n := strings.Count(p.log.String(), "automatic checkpoint failed"); n > 1 {
		t.Errorf("the failing checkpoint was logged %d times in a few seconds", n)
	}

	resize("64m")
	for i := 0; i < 3; i++ {
		if code, body := insert(id); code != 200 {
			t.Fatalf("write after the disk has room again: %d %s", code, body)
		}
		acked[id] = true
		id++
	}
	p.terminate(t)

	store, err := file.New(replicaDir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "restored.db")
	if _, err := restore.Restore(context.Background(), replica.Sub(store, "default"), out, restore.Options{IntegrityCheck: true}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	have := idsIn(t, out)
	if len(have) != len(acked) {
		t.Errorf("replica holds %d rows, %d were acknowledged", len(have), len(acked))
	}
	for id := range acked {
		if !have[id] {
			t.Fatalf("acknowledged row %d missing from the replica", id)
		}
	}
	t.Logf("%d writes acknowledged, %d refused while the disk was full; the replica holds exactly the acknowledged rows", len(acked), failures)
}
