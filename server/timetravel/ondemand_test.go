package timetravel

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/restore/restoretest"
	"github.com/sluicedb/sluice/server/coldopen"
)

// heldStore holds every whole-object GET (a restore's downloads of the
// files' bodies) until release is closed; range reads pass.
type heldStore struct {
	replica.Store
	release chan struct{}
}

func (s heldStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

// With OnDemand, a read at a past state is answered from the pages it
// touches while the state's restore cannot progress, with exactly the rows
// of that state; once the restore ends, reads use the restored file and
// answer the same.
func TestPastStateIsReadOnDemandWhileRestored(t *testing.T) {
	ctx := context.Background()
	root, err := file.New(filepath.Join(t.TempDir(), "replica"))
	if err != nil {
		t.Fatal(err)
	}
	h := restoretest.New(t, replica.Sub(root, "db"), t.TempDir())
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, pad BLOB)")
	h.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000)
		INSERT INTO t SELECT i, randomblob(200) FROM n`) // a snapshot larger than one index read
	h.Ship(time.Now())
	h.Exec("DELETE FROM t WHERE id > 2000")
	h.Ship(time.Now())
	h.Exec("DELETE FROM t WHERE id > 1000")
	h.Ship(time.Now())

	held := heldStore{Store: root, release: make(chan struct{})}
	dir := filepath.Join(t.TempDir(), "past")
	c, err := New(Options{Dir: dir, Store: held, OnDemand: &coldopen.Options{ReadAhead: 8 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := c.At(actx, "db", Point{TXID: 2})
	if err != nil {
		t.Fatalf("At TXID 2 while its restore is held: %v", err)
	}
	if n := count(t, v); n != 2000 {
		t.Fatalf("on demand at TXID 2: %d rows, want 2000", n)
	}
	if c.Builds() != 0 || len(stateFiles(t, dir)) != 0 {
		t.Fatalf("the state was restored (%d builds, files %v) although its downloads are held: the read proves nothing", c.Builds(), stateFiles(t, dir))
	}
	close(held.release)
	deadline := time.Now().Add(10 * time.Second)
	for c.Builds() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if c.Builds() != 1 {
		t.Fatal("the past state was not restored once its downloads were released")
	}
	if n := count(t, v); n != 2000 {
		t.Fatalf("after the restore at TXID 2: %d rows, want 2000", n)
	}
}
