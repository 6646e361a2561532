package s3_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/internal/testenv"
	"github.com/sluicedb/sluice/replica"
)

// The eager listing of the newest state (level 0 listed beside the upper
// levels) gives exactly what the two-step listing gives, on MinIO, with a
// short level 0, with upper levels covering part of it, and with a level 0
// longer than a LIST page.
func TestListNewestLTXEagerMatchesTwoStep(t *testing.T) {
	mn := testenv.MinIO(t)
	s := open(t, mn.URL(mn.NewBucket(t), "db"))
	ctx := context.Background()
	put := func(keys ...string) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for _, k := range keys {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				if _, err := s.PutIfAbsent(ctx, k, strings.NewReader("x"), 1); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	flat := func(levels [][]replica.LTXFile) string {
		var ks []string
		for _, files := range levels {
			for _, f := range files {
				ks = append(ks, f.Key)
			}
		}
		return strings.Join(ks, ",")
	}
	check := func(stage string, wantL0 int) {
		t.Helper()
		two, err := replica.ListNewestLTX(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		eager, err := replica.ListNewestLTXEager(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if flat(eager) != flat(two) {
			t.Fatalf("%s: eager listing differs:\n%s\nwant %s", stage, flat(eager), flat(two))
		}
		if len(eager[0]) != wantL0 {
			t.Fatalf("%s: %d level-0 files, want %d", stage, len(eager[0]), wantL0)
		}
		t.Logf("%s: %d level-0 files listed, as the two-step listing", stage, len(eager[0]))
	}
	var keys []string
	for txid := ltx.TXID(1); txid <= 10; txid++ {
		keys = append(keys, replica.LTXKey(0, txid, txid))
	}
	put(keys...)
	check("level 0 only", 10)
	put(replica.LTXKey(1, 1, 6), replica.LTXKey(0, 7, 9))
	check("level 1 covering 1..6", 5)
	keys = keys[:0]
	for txid := ltx.TXID(11); txid <= 1500; txid++ {
		keys = append(keys, replica.LTXKey(0, txid, txid))
	}
	put(keys...)
	check("1500 level-0 files, none covered past 6", 1495)
	put(replica.LTXKey(1, 7, 1490))
	check("level 1 covering 1..1490", 10)
}
