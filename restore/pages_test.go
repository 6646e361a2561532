package restore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore/restoretest"
)

// Every page read through Pages is the restored file's page, and a damaged
// small file (read whole with its index) is refused before any page is
// served, as a restore would refuse it.
func TestPagesMatchTheRestoreAndRefuseDamage(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	h.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
	h.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) INSERT INTO t SELECT i, randomblob(300) FROM n`)
	h.Ship(time.Now())
	h.Exec("UPDATE t SET v = zeroblob(300) WHERE id % 50 = 0")
	h.Ship(time.Now())
	h.Exec("INSERT INTO t VALUES (5000, 'last')")
	last := h.Ship(time.Now())

	out := t.TempDir() + "/r.db"
	if _, err := Restore(ctx, store, out, Options{}); err != nil {
		t.Fatal(err)
	}
	want := readFile(t, out)
	p, err := OpenPages(ctx, store, Options{}, 32<<10)
	if err != nil {
		t.Fatal(err)
	}
	if p.Size() != int64(len(want)) {
		t.Fatalf("size %d, restored file %d", p.Size(), len(want))
	}
	ps := int(p.PageSize())
	seen := map[uint32]bool{}
	check := func(pgno uint32, page []byte) {
		seen[pgno] = true
		if !bytes.Equal(page, want[(int(pgno)-1)*ps:int(pgno)*ps]) {
			t.Fatalf("page %d differs from the restored file's", pgno)
		}
	}
	p.Warm(check)
	for pgno := uint32(1); pgno <= uint32(p.Size()/int64(ps)); pgno++ {
		if !seen[pgno] {
			if err := p.Fetch(ctx, pgno, 16<<10, check); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d pages checked; %d range reads, %d bytes", len(seen), p.Requests(), p.Bytes())

	rc, err := store.Get(ctx, last.Key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(rc)
	rc.Close()
	body[len(body)/2] ^= 1
	if _, err := store.Put(ctx, last.Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenPages(ctx, store, Options{}, 0); !errors.Is(err, replica.ErrDamaged) {
		t.Fatalf("OpenPages over a damaged newest file: %v, want an error matching replica.ErrDamaged", err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
