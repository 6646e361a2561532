package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/replicaurl"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// damage rewrites the object at key with a byte flipped in its middle
// (a checksum mismatch) or cut in half (a truncated upload).
func damage(t *testing.T, store replica.Store, key string, truncate bool) {
	t.Helper()
	data := readObject(t, store, key)
	if truncate {
		data = data[:len(data)/2]
	} else {
		data[len(data)/2] ^= 0xff
	}
	if _, err := store.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

// fallbackScenario: level-1 and snapshot files compacted over level-0 files
// that are still present; damaging the compacted ones must not fail the
// restore, and removing the level-0 files they cover then must, clearly.
func fallbackScenario(t *testing.T, store replica.Store) {
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXIDs 1..16
	fs := h.Files
	snap := compactInto(t, store, 9, fs[0:6]) // snapshot 1..6
	l1 := compactInto(t, store, 1, fs[6:12])  // 7..12
	for _, c := range []struct {
		name     string
		truncate bool
	}{{"checksum mismatch", false}, {"truncated", true}} {
		t.Run(c.name, func(t *testing.T) {
			// Intact, the plan uses both compacted files.
			_, res, err := restoreTo(t, store, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if keys := keysOf(res.Files); !strings.Contains(keys, l1.Key) || !strings.Contains(keys, snap.Key) {
				t.Fatalf("the intact replica's plan %s does not use %s and %s", keys, snap.Key, l1.Key)
			}
			good := map[string][]byte{snap.Key: readObject(t, store, snap.Key), l1.Key: readObject(t, store, l1.Key)}
			defer func() {
				for k, v := range good {
					if _, err := store.Put(context.Background(), k, bytes.NewReader(v), int64(len(v))); err != nil {
						t.Fatal(err)
					}
				}
			}()
			damage(t, store, l1.Key, c.truncate)
			damage(t, store, snap.Key, c.truncate)

			var logs bytes.Buffer
			out, res, err := restoreTo(t, store, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatalf("level-0 files cover the damaged files' TXIDs, yet the restore failed: %v", err)
			}
			wantExact(t, h, out, h.Pos().TXID)
			if keys := keysOf(res.Files); strings.Contains(keys, l1.Key) || strings.Contains(keys, snap.Key) {
				t.Fatalf("plan %s still uses a damaged file", keys)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 2 || !strings.Contains(logs.String(), "damaged replica file left out") ||
				!strings.Contains(logs.String(), l1.Key) || !strings.Contains(logs.String(), snap.Key) {
				t.Fatalf("want one line per damaged file naming it, got:\n%s", logs.String())
			}
		})
	}

	// Without the level-0 files under the damaged level-1 file, nothing covers its TXIDs.
	damage(t, store, l1.Key, false)
	var keys []string
	for _, f := range fs[6:12] {
		keys = append(keys, f.Key)
	}
	if err := store.Delete(context.Background(), keys...); err != nil {
		t.Fatal(err)
	}
	out, _, err := restoreTo(t, store, Options{})
	if err == nil || !strings.Contains(err.Error(), "no other level covers TXIDs") || !strings.Contains(err.Error(), l1.Key) {
		t.Fatalf("want an error saying no level covers %s's TXIDs, got %v", l1.Key, err)
	}
	wantNoOutput(t, out)
}

func TestRestoreFallsBackFromDamagedHigherLevelFile(t *testing.T) {
	fallbackScenario(t, newStore(t))
}

func TestRestoreFallsBackFromDamagedHigherLevelFileInMinIO(t *testing.T) {
	m := testenv.MinIO(t)
	store, err := replicaurl.Open(context.Background(), m.URL(m.NewBucket(t), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fallbackScenario(t, store)
}

// TestRestoreLeadFileAfterTheBase: the largest file is not the first (a tiny
// first transaction, then a bulk load), and later files rewrite some of its
// pages and grow the database: every state restores exactly, with and
// without database checksums and with one download at a time.
func TestRestoreLeadFileAfterTheBase(t *testing.T) {
	for _, c := range []struct {
		name        string
		noChecksum  bool
		parallelism int
	}{{"checksums", false, 0}, {"no checksums", true, 0}, {"one download at a time", false, 1}} {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t)
			h := restoretest.New(t, store, t.TempDir())
			h.NoChecksum = c.noChecksum
			h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, b BLOB)")
			h.Ship(t0)
			h.Script(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000)
				INSERT INTO t (v, b) SELECT 'bulk-' || i, randomblob(500) FROM n;`)
			h.Ship(t0.Add(time.Second))
			for i := range 4 {
				h.Script(fmt.Sprintf(`UPDATE t SET v = v || '+%d' WHERE id %% 97 = %d;
					INSERT INTO t (v, b) SELECT 'tail-%d', randomblob(3000) FROM t WHERE id <= 20;`, i, i, i))
				h.Ship(t0.Add(time.Duration(2+i) * time.Second))
			}
			if h.Files[1].Size <= h.Files[0].Size {
				t.Fatalf("the bulk file (%d bytes) should be larger than the first (%d)", h.Files[1].Size, h.Files[0].Size)
			}
			for txid := ltx.TXID(2); txid <= h.Pos().TXID; txid++ {
				out, _, err := restoreTo(t, store, Options{TXID: txid, Parallelism: c.parallelism})
				if err != nil {
					t.Fatalf("TXID %d: %v", txid, err)
				}
				wantExact(t, h, out, txid)
			}
		})
	}
}

// A restore that no other level can rescue names the damaged object in a
// way callers can read (DamagedKey) and matches replica.ErrDamaged.
func TestDamagedKeyNamesTheObjectNoLevelCovers(t *testing.T) {
	err := noFallback([]*fileError{{file: replica.LTXFile{Key: "ltx/0/x.ltx", MinTXID: 5, MaxTXID: 5}, err: errors.New("file checksum mismatch")}},
		7, errors.New("gap"))
	if key, ok := DamagedKey(err); !ok || key != "ltx/0/x.ltx" || !errors.Is(err, replica.ErrDamaged) {
		t.Fatalf("DamagedKey(%v) = %q, %v", err, key, ok)
	}
	if _, ok := DamagedKey(fmt.Errorf("plan: %w", &fileError{err: replica.ErrUnavailable})); ok {
		t.Fatal("a store outage blamed on an object")
	}
}
