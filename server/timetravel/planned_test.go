package timetravel

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
	"github.com/sluicedb/sluice/server/coldopen"
)

// listGate lets the first LIST through and holds every later one until
// release is closed (a bucket whose LISTs are slow, as a far one's are).
type listGate struct {
	replica.Store
	lists   atomic.Int64
	release chan struct{}
}

func (g *listGate) List(ctx context.Context, prefix string) ([]replica.ObjectInfo, error) {
	if g.lists.Add(1) > 1 {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.List(ctx, prefix)
}

// A read at a past TXID costs one LIST before its answer: the plan made
// while the point was resolved is the on-demand view's, and the reads that
// follow while the state is restored do not resolve the point again. The
// answers hold exactly the state's rows, on demand and after the restore.
func TestPastStateAnswersAfterOneList(t *testing.T) {
	ctx := context.Background()
	root, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, replica.Sub(root, "db"), t.TempDir())
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, pad BLOB)")
	h.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000)
		INSERT INTO t SELECT i, randomblob(200) FROM n`)
	h.Ship(time.Now())
	h.Exec("DELETE FROM t WHERE id > 2000")
	h.Ship(time.Now())
	h.Exec("DELETE FROM t WHERE id > 1000")
	h.Ship(time.Now())

	gate := &listGate{Store: root, release: make(chan struct{})}
	c, err := New(Options{Dir: filepath.Join(t.TempDir(), "past"), Store: gate, OnDemand: &coldopen.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := c.At(actx, "db", Point{TXID: 2})
	if err != nil {
		t.Fatalf("At TXID 2 with one LIST allowed: %v", err)
	}
	if n := count(t, v); n != 2000 {
		t.Fatalf("on demand at TXID 2: %d rows, want 2000", n)
	}
	again, err := c.At(actx, "db", Point{TXID: 2})
	if err != nil {
		t.Fatalf("a second At TXID 2 while the state is restored: %v", err)
	}
	if n := count(t, again); n != 2000 {
		t.Fatalf("second read on demand at TXID 2: %d rows, want 2000", n)
	}
	if c.Builds() != 0 {
		t.Fatal("the state was restored although its LIST is held: the reads prove nothing")
	}
	t.Logf("two reads at TXID 2 answered on demand with %d LISTs asked (the later ones held)", gate.lists.Load())
	close(gate.release)
	deadline := time.Now().Add(10 * time.Second)
	for c.Builds() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.Builds() != 1 {
		t.Fatal("the past state was not restored once its LIST was released")
	}
	if n := count(t, v); n != 2000 {
		t.Fatalf("after the restore at TXID 2: %d rows, want 2000", n)
	}
}
