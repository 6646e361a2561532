package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// soakReport is the part of `sluice-bench soak -json` the tests assert on.
type soakReport struct {
	OK      bool `json:"ok"`
	Windows []struct {
		Index   int   `json:"index"`
		Partial bool  `json:"partial"`
		Acked   int64 `json:"acked"`
	} `json:"windows"`
	Verdicts []struct {
		Resource string `json:"resource"`
		Judged   bool   `json:"judged"`
		OK       bool   `json:"ok"`
		Detail   string `json:"detail"`
	} `json:"verdicts"`
	Level1Files int `json:"level1_files_seen"`
	Check       struct {
		Acked   int64 `json:"acknowledged"`
		Present int64 `json:"acknowledged_present"`
		Foreign int64 `json:"foreign_rows"`
	} `json:"restore_check"`
	ObjectsListed  int      `json:"objects_listed_at_end"`
	ObjectsCounted int      `json:"objects_counted_at_end"`
	Failures       []string `json:"failures"`
}

// runSoak runs `sluice-bench soak` (its own MinIO and sluice serve -durability
// sync) and checks what its report says beyond the exit code: every window
// acknowledged writes, the process and backlog rules were applied, level-1
// compaction ran several times per database, and the restored copies hold
// every acknowledged write.
func runSoak(t *testing.T, duration time.Duration, connections, databases int, warmup string, minLevel1PerDB int) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "soak.json")
	ctx, cancel := context.WithTimeout(context.Background(), duration+10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, benchBin, "soak", "-duration", duration.String(),
		"-connections", strconv.Itoa(connections), "-databases", strconv.Itoa(databases), "-warmup", warmup, "-json", report)
	out, err := cmd.CombinedOutput()
	t.Logf("sluice-bench soak -duration %s -connections %d -databases %d:\n%s", duration, connections, databases, out)
	if err != nil {
		t.Fatalf("bench soak failed: %v (its FAIL lines above say which window and resource)", err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r soakReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", report, err)
	}
	if !r.OK || len(r.Failures) > 0 {
		t.Fatalf("report says not ok: %v", r.Failures)
	}
	full := 0
	for _, w := range r.Windows {
		if w.Partial {
			continue
		}
		full++
		if w.Acked == 0 {
			t.Errorf("window %d acknowledged nothing", w.Index)
		}
	}
	if want := int(duration / (10 * time.Second)); full < want {
		t.Errorf("%d full windows, want at least %d", full, want)
	}
	judged := map[string]bool{}
	for _, v := range r.Verdicts {
		if v.Judged {
			judged[v.Resource] = true
		}
		if !v.OK {
			t.Errorf("%s: %s", v.Resource, v.Detail)
		}
	}
	for _, res := range []string{"RSS", "descriptors", "store connections", "level-0 backlog", "level-0 backlog trend"} {
		if !judged[res] {
			t.Errorf("%s was not judged", res)
		}
	}
	if r.Level1Files < minLevel1PerDB*databases {
		t.Errorf("%d level-1 files seen over %d database(s): compaction ran fewer than %d times per database", r.Level1Files, databases, minLevel1PerDB)
	}
	if r.Check.Acked == 0 || r.Check.Present != r.Check.Acked || r.Check.Foreign != 0 {
		t.Errorf("restore check: %+v", r.Check)
	}
	if r.ObjectsListed == 0 || r.ObjectsListed != r.ObjectsCounted {
		t.Errorf("objects at the end: %d listed, %d counted", r.ObjectsListed, r.ObjectsCounted)
	}
}

// Three minutes of 20 connections inserting into one database cross the
// 30-second level-1 compaction six times; a merge that takes the store
// client's connections or stalls the shipper shows up as a silent window.
// The two soaks run side by side (each its own MinIO and server): what they
// judge is growth over their own run, which a neighbour's steady load does
// not make grow.
func TestSoakShort(t *testing.T) {
	t.Parallel()
	runSoak(t, 3*time.Minute, 20, 1, "1m", 4)
}

// The same load spread over 100 databases: 100 compactors, 100 shippers and
// their descriptors in one server.
func TestSoakShortManyDatabases(t *testing.T) {
	t.Parallel()
	runSoak(t, 2*time.Minute, 20, 100, "30s", 2)
}
