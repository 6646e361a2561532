package replica_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

var errNoSuchBucket = errors.New("no such bucket")

type unlistable struct{ replica.Store }

func (unlistable) List(context.Context, string) ([]replica.ObjectInfo, error) {
	return nil, errNoSuchBucket
}

// A store that cannot be listed (a wrong bucket, no credentials): the error
// says so once and still matches the cause.
func TestListAllLTXReportsOneFailureOnce(t *testing.T) {
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = replica.ListAllLTX(context.Background(), unlistable{fs})
	if !errors.Is(err, errNoSuchBucket) {
		t.Fatalf("error %v does not match its cause", err)
	}
	if n := strings.Count(err.Error(), errNoSuchBucket.Error()); n != 1 {
		t.Fatalf("the cause appears %d times in %q", n, err)
	}
	if _, err := replica.ListAllLTX(context.Background(), fs); err != nil {
		t.Fatalf("an empty, listable store: %v", err)
	}
}

// One LIST answers for every level: files are grouped by level and sorted,
// and keys under ltx/ that are not LTX files are left out.
func TestListAllLTXGroupsLevels(t *testing.T) {
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := []string{replica.LTXKey(0, 5, 5), replica.LTXKey(0, 3, 4), replica.LTXKey(1, 1, 4), replica.LTXKey(9, 1, 5), "ltx/0/notes.txt", "ltx/readme"}
	for _, k := range keys {
		if _, err := fs.PutIfAbsent(ctx, k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	levels, err := replica.ListAllLTX(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int][]string{}
	for l, files := range levels {
		for _, f := range files {
			if f.Level != l {
				t.Fatalf("%s listed at level %d", f.Key, l)
			}
			got[l] = append(got[l], f.Key)
		}
	}
	want := map[int][]string{0: {keys[1], keys[0]}, 1: {keys[2]}, 9: {keys[3]}}
	if len(got) != len(want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
	for l, ks := range want {
		if strings.Join(got[l], ",") != strings.Join(ks, ",") {
			t.Fatalf("level %d: %v, want %v", l, got[l], ks)
		}
	}
}

// The newest-state listing leaves out the level-0 files an upper level
// covers, and lists all of level 0 when no upper level exists.
func TestListNewestLTXSkipsCoveredLevel0(t *testing.T) {
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(k string) {
		if _, err := fs.PutIfAbsent(ctx, k, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	keysAt := func(levels [][]replica.LTXFile, l int) string {
		var ks []string
		for _, f := range levels[l] {
			ks = append(ks, f.Key)
		}
		return strings.Join(ks, ",")
	}
	for txid := ltx.TXID(1); txid <= 10; txid++ {
		put(replica.LTXKey(0, txid, txid))
	}
	levels, err := replica.ListNewestLTX(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(levels[0]); got != 10 {
		t.Fatalf("without upper levels: %d level-0 files listed, want 10", got)
	}
	put(replica.LTXKey(1, 1, 6))
	put(replica.LTXKey(0, 7, 9)) // a level-0 file of several TXIDs past the cover
	if levels, err = replica.ListNewestLTX(ctx, fs); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{replica.LTXKey(0, 7, 7), replica.LTXKey(0, 7, 9), replica.LTXKey(0, 8, 8), replica.LTXKey(0, 9, 9), replica.LTXKey(0, 10, 10)}, ",")
	if got := keysAt(levels, 0); got != want {
		t.Fatalf("level 0: %s\nwant %s", got, want)
	}
	if got := keysAt(levels, 1); got != replica.LTXKey(1, 1, 6) {
		t.Fatalf("level 1: %s", got)
	}
}
