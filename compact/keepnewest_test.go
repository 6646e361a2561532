package compact

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// Litestream takes its position from the newest level-0 file when it takes a
// replica over; with level 0 empty it would start again at TXID 1 over the
// history. However long the replica sits idle and whatever retention
// deletes, the newest level-0 file stays, and only it.
func TestRetentionKeepsTheNewestLevel0File(t *testing.T) {
	fs, store := newStore(t)
	h := restoretest.New(t, fs, fastTempDir(t))
	seedDB(h, 200)
	c := New(store, Config{}, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	now := t0
	for i := 0; i < 80; i++ {
		now = now.Add(time.Second)
		writeOnce(h, rng, i)
		c.Notify(h.Ship(now))
		if err := c.CompactOnce(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, c, now) // 60 hours: past every retention, snapshots included
	l0, err := replica.ListLTX(context.Background(), fs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l0) != 1 || l0[0].MaxTXID != h.Pos().TXID {
		t.Fatalf("level 0 after retention holds %v; want only the newest file, TXID %s", l0, h.Pos().TXID)
	}
	t.Logf("level 0 keeps %s; per level: %v", l0[0].Key, c.Stats().PerLevel)
}
