package compact

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// A damaged level-0 object is reported once and left out of the merges
// (no pass fails on it again); once a snapshot heals the replica it is
// moved aside, the newest state restores exactly, and level 1 goes on
// above the snapshot.
func TestDamagedInputIsReportedOnceAndCompactionGoesOn(t *testing.T) {
	ctx := context.Background()
	fs, _ := newStore(t)
	h, rng, now := shippedHistory(t, fs, 100, 8, 1)
	// The snapshot the writer will upload: made from the intact replica,
	// then taken out again.
	maker := New(fs, Config{Levels: []Level{{1, time.Hour}}, SnapshotInterval: time.Hour}, nil)
	if err := maker.CompactOnce(ctx, now); err != nil {
		t.Fatal(err)
	}
	var snap replica.LTXFile
	var snapBody []byte
	for _, level := range []int{1, replica.SnapshotLevel} {
		files, _ := replica.ListLTX(ctx, fs, level)
		for _, f := range files {
			if level == replica.SnapshotLevel {
				snap, snapBody = f, readAll(t, fs, f.Key)
			}
			if err := fs.Delete(ctx, f.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if snap.MaxTXID != h.Pos().TXID {
		t.Fatalf("snapshot %+v, want one at TXID %d", snap, h.Pos().TXID)
	}

	l0, _ := replica.ListLTX(ctx, fs, 0)
	victim := l0[len(l0)/2]
	body := readAll(t, fs, victim.Key)
	body[len(body)-20] ^= 1 // in the trailer's file checksum
	if _, err := fs.Put(ctx, victim.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}

	var reported []string
	c := New(fs, Config{Levels: []Level{{1, time.Hour}}, OnDamage: func(de *replica.DamageError) { reported = append(reported, de.Key) }}, nil)
	for i := range 3 {
		if err := c.CompactOnce(ctx, now.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
	}
	if len(reported) != 1 || reported[0] != victim.Key {
		t.Fatalf("reported %v, want [%s] once", reported, victim.Key)
	}
	if l1, _ := replica.ListLTX(ctx, fs, 1); len(l1) == 0 || l1[0].MaxTXID != victim.MinTXID-1 {
		t.Fatalf("level 1 = %+v, want the files before the damaged one merged", l1)
	}

	if _, err := fs.PutIfAbsent(ctx, snap.Key, bytes.NewReader(snapBody), int64(len(snapBody))); err != nil {
		t.Fatal(err)
	}
	if err := c.Healed(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(ctx, DamagedPrefix+victim.Key); err != nil {
		t.Fatalf("damaged object not moved aside: %v", err)
	}
	if _, err := fs.Stat(ctx, victim.Key); err == nil {
		t.Fatal("damaged object still in the LTX tree")
	}
	assertLatestRestored(t, fs, h, "after the heal")

	writeOnce(h, rng, 100)
	c.Notify(h.Ship(now.Add(3 * time.Hour)))
	if err := c.CompactOnce(ctx, now.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	l1, _ := replica.ListLTX(ctx, fs, 1)
	if top := l1[len(l1)-1]; top.MaxTXID != h.Pos().TXID {
		t.Fatalf("level 1 = %+v, want it to reach TXID %d above the snapshot", l1, h.Pos().TXID)
	}
	assertLatestRestored(t, fs, h, "after compaction went on")
	if len(reported) != 1 {
		t.Fatalf("reported %v after the heal", reported)
	}
}

// A missing object in the middle of the history is found by the first
// check of the chain (no merge ever reads it) and reported by its range.
func TestMissingObjectIsReportedByTheTailCheck(t *testing.T) {
	ctx := context.Background()
	fs, _ := newStore(t)
	shippedHistory(t, fs, 10, 5, 3)
	l0, _ := replica.ListLTX(ctx, fs, 0)
	victim := l0[3]
	if err := fs.Delete(ctx, victim.Key); err != nil {
		t.Fatal(err)
	}
	var reported []*replica.DamageError
	c := New(fs, Config{OnDamage: func(de *replica.DamageError) { reported = append(reported, de) }}, nil)
	if err := c.CheckTail(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || reported[0].Key != replica.LTXKey(0, victim.MinTXID, victim.MaxTXID) || reported[0].What != "missing" {
		t.Fatalf("reported %+v, want %s missing", reported, victim.Key)
	}
}

// The writer's own uploads past the TXID it opened at land out of order
// when pipelined: a listing can hold TXID N+2 while N+1 is still in
// flight. The tail check judges only what was there at open (TailEnd), so
// that hole is not reported as a missing object; without TailEnd it is.
func TestTailCheckIgnoresTheWritersOwnUploadsInFlight(t *testing.T) {
	ctx := context.Background()
	fs, _ := newStore(t)
	h, rng, now := shippedHistory(t, fs, 10, 5, 7)
	opened := h.Pos().TXID
	for i := 6; i <= 7; i++ { // this writer's next two uploads...
		writeOnce(h, rng, i)
		h.Ship(now)
	}
	inFlight := replica.LTXKey(0, opened+1, opened+1) // ...the first of them not landed yet
	if err := fs.Delete(ctx, inFlight); err != nil {
		t.Fatal(err)
	}
	for _, tailEnd := range []bool{true, false} {
		var reported []*replica.DamageError
		c := New(fs, Config{OnDamage: func(de *replica.DamageError) { reported = append(reported, de) }}, nil)
		if tailEnd {
			c.TailEnd(opened)
		}
		if err := c.CheckTail(ctx); err != nil {
			t.Fatal(err)
		}
		switch {
		case tailEnd && len(reported) != 0:
			t.Errorf("with TailEnd(%d): reported %+v, an upload in flight taken for damage", opened, reported)
		case !tailEnd && (len(reported) != 1 || reported[0].Key != inFlight):
			t.Errorf("without TailEnd: reported %+v, want %s missing (the check judges every file)", reported, inFlight)
		}
	}
}

// A merged file that does not decode is never uploaded.
func TestVerifyOutputRefusesACorruptMerge(t *testing.T) {
	hdr := ltx.Header{Version: ltx.Version, Flags: ltx.HeaderFlagNoChecksum, PageSize: 4096, Commit: 1, MinTXID: 2, MaxTXID: 3, Timestamp: 1}
	good := restoretest.Encode(t, hdr, []restoretest.Page{{Pgno: 1, Data: make([]byte, 4096)}}, 0)
	for name, b := range map[string][]byte{"good": good, "flipped": flip(good, len(good)/2), "cut": good[:len(good)-10]} {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = verifyOutput(f, hdr)
		f.Close()
		if (err == nil) != (name == "good") {
			t.Errorf("%s: verifyOutput = %v", name, err)
		}
	}
	if err := func() error {
		path := filepath.Join(t.TempDir(), "other")
		_ = os.WriteFile(path, good, 0o600)
		f, _ := os.Open(path)
		defer f.Close()
		other := hdr
		other.MaxTXID = 4
		return verifyOutput(f, other)
	}(); err == nil {
		t.Error("a file holding other TXIDs than its name passed")
	}
}

func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i] ^= 1
	return out
}
