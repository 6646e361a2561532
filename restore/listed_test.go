package restore

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/restore/restoretest"
)

// ResolveTXID agrees with ResolvePoint after retention: the same TXIDs
// resolve, the same points are refused with the span named, and the plan
// it hands over reads on demand exactly what a restore at that TXID holds.
func TestResolveTXIDMatchesResolvePoint(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	h := restoretest.New(t, store, t.TempDir())
	buildHistory(t, h) // TXIDs 1..16
	fs := h.Files
	compactInto(t, store, 9, fs[0:8])  // snapshot 1..8
	compactInto(t, store, 1, fs[8:12]) // 9..12
	var keys []string
	for _, f := range fs[:12] {
		keys = append(keys, f.Key)
	}
	if err := store.Delete(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	for _, txid := range []ltx.TXID{8, 12, 14, 16} {
		span, l, err := ResolveTXID(ctx, store, txid)
		if err != nil || l.TXID() != txid || span.Oldest != 8 || span.Newest != 16 {
			t.Fatalf("TXID %d: %v, listed at %d, span %+v; want 8..16", txid, err, l.TXID(), span)
		}
		p, err := OpenPagesPlanned(ctx, store, l, 0)
		if err != nil {
			t.Fatalf("TXID %d: open pages from the plan: %v", txid, err)
		}
		if p.TXID() != txid {
			t.Fatalf("TXID %d: pages at %d", txid, p.TXID())
		}
		q, err := OpenPages(ctx, store, Options{TXID: txid}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Size() != q.Size() || p.Files() != q.Files() {
			t.Fatalf("TXID %d: planned pages %d bytes from %d files, listed anew %d bytes from %d files", txid, p.Size(), p.Files(), q.Size(), q.Files())
		}
		// Every page read through the handed-over plan equals a restore's.
		out := filepath.Join(t.TempDir(), "r.db")
		if _, err := Restore(ctx, store, out, Options{TXID: txid}); err != nil {
			t.Fatal(err)
		}
		comparePages(t, p, out)
	}
	for _, c := range []struct {
		txid ltx.TXID
		say  string
	}{{3, "before the oldest state retention kept"}, {17, "after the newest TXID"}, {10, "inside compacted file"}} {
		_, _, err := ResolveTXID(ctx, store, c.txid)
		var pe *PointError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.say) || !strings.Contains(err.Error(), "states available: TXID 8 (") {
			t.Errorf("TXID %d: %v; want a *PointError saying %q and naming TXIDs 8 to 16", c.txid, err, c.say)
		}
	}
	if _, _, err := ResolveTXID(ctx, newStore(t), 1); !errors.Is(err, ErrNoReplica) {
		t.Errorf("an empty replica: %v, want ErrNoReplica", err)
	}
}

// comparePages reads every page of p and checks it against the file at out.
func comparePages(t *testing.T, p *Pages, out string) {
	t.Helper()
	want := readFile(t, out)
	if p.Size() != int64(len(want)) {
		t.Fatalf("size %d, restored file %d", p.Size(), len(want))
	}
	ps := int(p.PageSize())
	for pgno := uint32(1); pgno <= uint32(p.Size()/int64(ps)); pgno++ {
		if err := p.Fetch(context.Background(), pgno, 0, func(n uint32, page []byte) {
			if n == pgno && !bytes.Equal(page, want[(int(n)-1)*ps:int(n)*ps]) {
				t.Fatalf("page %d differs from the restored file's", n)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
}
