// Package replicatest is the conformance suite every replica.Store backend
// passes (file, S3/MinIO, GCS, Azure), plus an end-to-end check that the
// Litestream v0.5 layout helpers (PutLTX, ListLTX, LatestPos) work on it.
//
// It is imported only by tests. It imports testing, replica and superfly/ltx.
package replicatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// RunConformance runs the whole suite. newStore must return an empty store,
// rooted at a fresh prefix, for each call; the suite closes it.
func RunConformance(t *testing.T, newStore func(t *testing.T) replica.Store) {
	open := func(t *testing.T) replica.Store {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close %s: %v", s, err)
			}
		})
		return s
	}
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open(t)) })
	t.Run("Missing", func(t *testing.T) { testMissing(t, open(t)) })
	t.Run("GetRange", func(t *testing.T) { testGetRange(t, open(t)) })
	t.Run("PutIfAbsent", func(t *testing.T) { testPutIfAbsent(t, open(t)) })
	t.Run("PutIfAbsentRace", func(t *testing.T) { testPutIfAbsentRace(t, open(t)) })
	t.Run("PutIfMatch", func(t *testing.T) { testPutIfMatch(t, open(t)) })
	t.Run("GetInfo", func(t *testing.T) { testGetInfo(t, open(t)) })
	t.Run("Put", func(t *testing.T) { testPut(t, open(t)) })
	t.Run("List", func(t *testing.T) { testList(t, open(t)) })
	t.Run("ListPaging", func(t *testing.T) { testListPaging(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, open(t)) })
	t.Run("LTXLayout", func(t *testing.T) { testLTXLayout(t, open(t)) })
	t.Run("Probe", func(t *testing.T) { testProbe(t, open(t)) })
}

// testProbe: the start-up probe passes on the store and leaves nothing behind.
func testProbe(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	if err := replica.Probe(ctx, s); err != nil {
		t.Fatalf("probe: %v", err)
	}
	left, err := s.List(ctx, replica.ProbePrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the probe left %d object(s): %s", len(left), left[0].Key)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustPutIfAbsent(t *testing.T, s replica.Store, key string, data []byte) replica.ObjectInfo {
	t.Helper()
	info, err := s.PutIfAbsent(ctxT(t), key, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("PutIfAbsent %s (%d bytes): %v", key, len(data), err)
	}
	return info
}

func mustGet(t *testing.T, s replica.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

func mustGetRange(t *testing.T, s replica.Store, key string, off, n int64) []byte {
	t.Helper()
	rc, err := s.GetRange(ctxT(t), key, off, n)
	if err != nil {
		t.Fatalf("GetRange %s [%d,+%d): %v", key, off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read range %s [%d,+%d): %v", key, off, n, err)
	}
	return b
}

func equalBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes %s, want %d bytes %s", what, len(got), preview(got), len(want), preview(want))
	}
}

func preview(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%q…", b[:16])
	}
	return fmt.Sprintf("%q", b)
}

func testRoundTrip(t *testing.T, s replica.Store) {
	cases := []struct {
		key  string
		data []byte
	}{
		{"empty", []byte{}},
		{"small", []byte("hello, sluice")},
		{"dir/nested/five-mb.bin", randomBytes(5<<20+123, 1)},
	}
	for _, c := range cases {
		info := mustPutIfAbsent(t, s, c.key, c.data)
		if info.Size != int64(len(c.data)) {
			t.Errorf("PutIfAbsent %s returned Size %d, want %d", c.key, info.Size, len(c.data))
		}
		if info.ETag == "" {
			t.Errorf("PutIfAbsent %s returned an empty ETag", c.key)
		}
		equalBytes(t, "Get "+c.key, mustGet(t, s, c.key), c.data)
		st, err := s.Stat(ctxT(t), c.key)
		if err != nil {
			t.Fatalf("Stat %s: %v", c.key, err)
		}
		if st.Size != int64(len(c.data)) || st.Key != c.key {
			t.Errorf("Stat %s = {Key %q Size %d}, want {Key %q Size %d}", c.key, st.Key, st.Size, c.key, len(c.data))
		}
		if st.ETag != info.ETag {
			t.Errorf("Stat %s ETag %q differs from the ETag PutIfAbsent returned, %q", c.key, st.ETag, info.ETag)
		}
		if st.ModTime.IsZero() {
			t.Errorf("Stat %s: zero ModTime", c.key)
		}
	}
	// An unknown size (-1) streams too.
	data := randomBytes(300<<10, 2)
	if _, err := s.PutIfAbsent(ctxT(t), "unknown-size", io.MultiReader(bytes.NewReader(data)), -1); err != nil {
		t.Fatalf("PutIfAbsent with size -1: %v", err)
	}
	equalBytes(t, "Get unknown-size", mustGet(t, s, "unknown-size"), data)
}

func testMissing(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	if _, err := s.Get(ctx, "no/such/key"); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("Get of a missing key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx, "no/such/key", 2, 5); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("GetRange of a missing key: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "no/such/key"); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("Stat of a missing key: err = %v, want ErrNotFound", err)
	}
	// A "directory" (a prefix of other keys) is not an object.
	mustPutIfAbsent(t, s, "dir/child", []byte("x"))
	if _, err := s.Stat(ctx, "dir"); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("Stat of a key that is only a prefix: err = %v, want ErrNotFound", err)
	}
	if objs, err := s.List(ctx, "nothing/here/"); err != nil || len(objs) != 0 {
		t.Errorf("List of an empty prefix = %v, %v; want no objects, no error", objs, err)
	}
}

func testGetRange(t *testing.T, s replica.Store) {
	data := randomBytes(100_000, 3)
	mustPutIfAbsent(t, s, "r", data)
	equalBytes(t, "range [10,+20)", mustGetRange(t, s, "r", 10, 20), data[10:30])
	equalBytes(t, "range [0,+1)", mustGetRange(t, s, "r", 0, 1), data[:1])
	equalBytes(t, "range [99000,end)", mustGetRange(t, s, "r", 99_000, -1), data[99_000:])
	equalBytes(t, "range [0,end)", mustGetRange(t, s, "r", 0, -1), data)
	equalBytes(t, "last 16 bytes", mustGetRange(t, s, "r", int64(len(data))-16, 16), data[len(data)-16:])
	equalBytes(t, "last byte to end", mustGetRange(t, s, "r", int64(len(data))-1, -1), data[len(data)-1:])
	equalBytes(t, "zero-length range", mustGetRange(t, s, "r", 5, 0), nil)
	mustPutIfAbsent(t, s, "empty", nil)
	equalBytes(t, "whole empty object by range", mustGetRange(t, s, "empty", 0, -1), nil)
}

func testPutIfAbsent(t *testing.T, s replica.Store) {
	orig := []byte("original body")
	info := mustPutIfAbsent(t, s, "k", orig)
	_, err := s.PutIfAbsent(ctxT(t), "k", bytes.NewReader([]byte("intruder")), 8)
	if !errors.Is(err, replica.ErrExists) {
		t.Fatalf("second PutIfAbsent: err = %v, want ErrExists", err)
	}
	// Unseekable bodies take another upload path in some backends.
	_, err = s.PutIfAbsent(ctxT(t), "k", io.MultiReader(strings.NewReader("streamed intruder")), -1)
	if !errors.Is(err, replica.ErrExists) {
		t.Fatalf("PutIfAbsent of an unseekable body on a taken key: err = %v, want ErrExists", err)
	}
	equalBytes(t, "body after a refused PutIfAbsent", mustGet(t, s, "k"), orig)
	st, err := s.Stat(ctxT(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	if st.ETag != info.ETag {
		t.Errorf("ETag changed after a refused PutIfAbsent: %q -> %q", info.ETag, st.ETag)
	}
}

// testPutIfAbsentRace is ARCHITECTURE.md invariant 2 in miniature: many writers race for one
// key; exactly one owns it and the stored body is that writer's.
func testPutIfAbsentRace(t *testing.T, s replica.Store) {
	const writers = 16
	ctx := ctxT(t)
	bodies := make([][]byte, writers)
	errs := make([]error, writers)
	for i := range bodies {
		bodies[i] = append([]byte(fmt.Sprintf("writer-%02d:", i)), randomBytes(4096, uint64(100+i))...)
	}
	var start, done sync.WaitGroup
	start.Add(1)
	for i := 0; i < writers; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			_, errs[i] = s.PutIfAbsent(ctx, "ltx/0/race", bytes.NewReader(bodies[i]), int64(len(bodies[i])))
		}()
	}
	start.Done()
	done.Wait()
	var winners []int
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, i)
		case errors.Is(err, replica.ErrExists):
		default:
			t.Errorf("writer %d: unexpected error (want nil or ErrExists): %v", i, err)
		}
	}
	stored := mustGet(t, s, "ltx/0/race")
	if len(winners) != 1 {
		t.Fatalf("%d writers won the race for one key (%v), want exactly 1", len(winners), winners)
	}
	equalBytes(t, "stored body vs the winner's", stored, bodies[winners[0]])
}

func testPutIfMatch(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	v1 := mustPutIfAbsent(t, s, "m", []byte("version one"))
	v2, err := s.PutIfMatch(ctx, "m", bytes.NewReader([]byte("version two")), 11, v1.ETag)
	if err != nil {
		t.Fatalf("PutIfMatch with the current ETag: %v", err)
	}
	if v2.ETag == "" || v2.ETag == v1.ETag {
		t.Errorf("PutIfMatch returned ETag %q; want a new, non-empty one (old %q)", v2.ETag, v1.ETag)
	}
	equalBytes(t, "after PutIfMatch", mustGet(t, s, "m"), []byte("version two"))
	if st, err := s.Stat(ctx, "m"); err != nil || st.ETag != v2.ETag {
		t.Errorf("Stat after PutIfMatch = %q, %v; want ETag %q", st.ETag, err, v2.ETag)
	}

	// The stale ETag must be refused and the content left alone.
	_, err = s.PutIfMatch(ctx, "m", bytes.NewReader([]byte("stale writer")), 12, v1.ETag)
	if !errors.Is(err, replica.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch with a stale ETag: err = %v, want ErrPreconditionFailed", err)
	}
	_, err = s.PutIfMatch(ctx, "m", io.MultiReader(strings.NewReader("stale, streamed")), -1, v1.ETag)
	if !errors.Is(err, replica.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch of an unseekable body with a stale ETag: err = %v, want ErrPreconditionFailed", err)
	}
	equalBytes(t, "after a refused PutIfMatch", mustGet(t, s, "m"), []byte("version two"))

	// The new ETag works again (a chain of compare-and-swaps).
	if _, err := s.PutIfMatch(ctx, "m", bytes.NewReader([]byte("version three")), 13, v2.ETag); err != nil {
		t.Fatalf("PutIfMatch with the ETag of the previous PutIfMatch: %v", err)
	}
	equalBytes(t, "after the second PutIfMatch", mustGet(t, s, "m"), []byte("version three"))

	_, err = s.PutIfMatch(ctx, "missing", bytes.NewReader([]byte("x")), 1, v1.ETag)
	if !errors.Is(err, replica.ErrNotFound) && !errors.Is(err, replica.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch on a missing key: err = %v, want ErrNotFound or ErrPreconditionFailed", err)
	}
	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("a refused PutIfMatch created the object: Stat err = %v", err)
	}
}

// testGetInfo: replica.GetInfo (one request on a store that gives the
// ETag with the body) returns the bytes and an ETag a conditional replace
// accepts, and only the current one.
func testGetInfo(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	v1 := mustPutIfAbsent(t, s, "gi", []byte("version one"))
	rc, info, err := replica.GetInfo(ctx, s, "gi")
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	equalBytes(t, "GetInfo's body", body, []byte("version one"))
	if info.ETag != v1.ETag || info.Size != int64(len(body)) {
		t.Errorf("GetInfo = ETag %q size %d; want the create's ETag %q and size %d", info.ETag, info.Size, v1.ETag, len(body))
	}
	v2, err := s.PutIfMatch(ctx, "gi", bytes.NewReader([]byte("version two")), 11, info.ETag)
	if err != nil {
		t.Fatalf("PutIfMatch with GetInfo's ETag: %v", err)
	}
	if rc, info, err = replica.GetInfo(ctx, s, "gi"); err != nil || info.ETag != v2.ETag {
		t.Errorf("GetInfo after PutIfMatch = ETag %q, %v; want %q", info.ETag, err, v2.ETag)
	}
	if err == nil {
		rc.Close()
	}
	if _, err := s.PutIfMatch(ctx, "gi", bytes.NewReader([]byte("stale")), 5, v1.ETag); !errors.Is(err, replica.ErrPreconditionFailed) {
		t.Errorf("PutIfMatch with the ETag GetInfo gave before the change: err = %v, want ErrPreconditionFailed", err)
	}
	if _, _, err := replica.GetInfo(ctx, s, "gi-missing"); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("GetInfo of a missing key: err = %v, want ErrNotFound", err)
	}
}

func testPut(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	for _, body := range []string{"first", "second, longer body"} {
		info, err := s.Put(ctx, "p", strings.NewReader(body), int64(len(body)))
		if err != nil {
			t.Fatalf("Put %q: %v", body, err)
		}
		if info.Size != int64(len(body)) {
			t.Errorf("Put returned Size %d, want %d", info.Size, len(body))
		}
		equalBytes(t, "after Put", mustGet(t, s, "p"), []byte(body))
	}
}

func testList(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	keys := map[string]int{
		"ltx/0/0000000000000001-0000000000000001.ltx": 10,
		"ltx/0/0000000000000002-0000000000000002.ltx": 11,
		"ltx/1/0000000000000001-0000000000000002.ltx": 12,
		"ltx/10/zzz":     13,
		"ltx/1x":         14,
		"ltx/9/snapshot": 15,
		"sluice/lease":   16,
		"ltxfile":        17,
	}
	for k, n := range keys {
		mustPutIfAbsent(t, s, k, randomBytes(n, uint64(n)))
	}
	check := func(prefix string, want ...string) {
		t.Helper()
		objs, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List %q: %v", prefix, err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.Key)
			if n, ok := keys[o.Key]; ok && o.Size != int64(n) {
				t.Errorf("List %q: %s has Size %d, want %d", prefix, o.Key, o.Size, n)
			}
		}
		if !sort.StringsAreSorted(got) {
			t.Errorf("List %q is not sorted: %v", prefix, got)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("List %q = %v, want %v", prefix, got, want)
		}
	}
	check("ltx/0/", "ltx/0/0000000000000001-0000000000000001.ltx", "ltx/0/0000000000000002-0000000000000002.ltx")
	check("ltx/1/", "ltx/1/0000000000000001-0000000000000002.ltx")
	check("ltx/10/", "ltx/10/zzz")
	check("ltx/1", "ltx/1/0000000000000001-0000000000000002.ltx", "ltx/10/zzz", "ltx/1x")
	check("sluice/", "sluice/lease")
	check("ltx/", "ltx/0/0000000000000001-0000000000000001.ltx", "ltx/0/0000000000000002-0000000000000002.ltx",
		"ltx/1/0000000000000001-0000000000000002.ltx", "ltx/10/zzz", "ltx/1x", "ltx/9/snapshot")
	check("", "ltx/0/0000000000000001-0000000000000001.ltx", "ltx/0/0000000000000002-0000000000000002.ltx",
		"ltx/1/0000000000000001-0000000000000002.ltx", "ltx/10/zzz", "ltx/1x", "ltx/9/snapshot", "ltxfile", "sluice/lease")
	check("ltx/2/")

	// ListAfter (the store's own where it has one, as S3 does) is List
	// without the keys <= after, whatever the store's key layout.
	for _, c := range []struct{ prefix, after string }{
		{"ltx/", "ltx/0/~"}, {"ltx/", "ltx/0/0000000000000001-0000000000000001.ltx"}, {"ltx/", ""},
		{"ltx/0/", "ltx/0/0000000000000001-0000000000000001.ltx"}, {"ltx/0/", "ltx/0/0000000000000002-0000000000000002.ltx"},
		{"ltx/1", "ltx/1/~"}, {"ltx/9/", "ltx/9/a"}, {"", "ltx/1x"}, {"", "ltx/0/~"}, {"sluice/", "sluice/a"},
	} {
		all, err := s.List(ctx, c.prefix)
		if err != nil {
			t.Fatalf("List %q: %v", c.prefix, err)
		}
		var want, got []string
		for _, o := range all {
			if o.Key > c.after {
				want = append(want, o.Key)
			}
		}
		objs, err := replica.ListAfter(ctx, s, c.prefix, c.after)
		if err != nil {
			t.Fatalf("ListAfter %q %q: %v", c.prefix, c.after, err)
		}
		for _, o := range objs {
			got = append(got, o.Key)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("ListAfter %q %q = %v, want %v", c.prefix, c.after, got, want)
		}
	}
}

// testListPaging lists more keys than one LIST page holds on S3 (1000).
func testListPaging(t *testing.T, s replica.Store) {
	const n = 1010
	ctx := ctxT(t)
	keys := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				_, err := s.PutIfAbsent(ctx, fmt.Sprintf("many/%05d", i), bytes.NewReader([]byte{byte(i)}), 1)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		keys <- i
	}
	close(keys)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("upload %d keys: %v", n, firstErr)
	}
	objs, err := s.List(ctx, "many/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != n {
		t.Fatalf("List of %d keys returned %d", n, len(objs))
	}
	for i, o := range objs {
		if want := fmt.Sprintf("many/%05d", i); o.Key != want || o.Size != 1 {
			t.Fatalf("List entry %d = {%q %d}, want {%q 1}", i, o.Key, o.Size, want)
		}
	}
	if err := s.Delete(ctx, func() []string {
		var ks []string
		for _, o := range objs {
			ks = append(ks, o.Key)
		}
		return ks
	}()...); err != nil {
		t.Fatalf("Delete %d keys: %v", n, err)
	}
	if objs, err := s.List(ctx, "many/"); err != nil || len(objs) != 0 {
		t.Fatalf("after deleting %d keys, List = %d objects, %v", n, len(objs), err)
	}
}

func testDelete(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	for _, k := range []string{"d/a", "d/b", "d/c", "keep"} {
		mustPutIfAbsent(t, s, k, []byte(k))
	}
	if err := s.Delete(ctx, "d/a", "d/missing", "d/c", "never/existed"); err != nil {
		t.Fatalf("Delete with some missing keys: %v", err)
	}
	for _, k := range []string{"d/a", "d/c"} {
		if _, err := s.Stat(ctx, k); !errors.Is(err, replica.ErrNotFound) {
			t.Errorf("after Delete, Stat %s: err = %v, want ErrNotFound", k, err)
		}
	}
	objs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	if strings.Join(got, ",") != "d/b,keep" {
		t.Errorf("List after Delete = %v, want [d/b keep]", got)
	}
	if err := s.Delete(ctx); err != nil {
		t.Errorf("Delete with no keys: %v", err)
	}
	// A deleted key can be created again.
	mustPutIfAbsent(t, s, "d/a", []byte("again"))
	equalBytes(t, "recreated key", mustGet(t, s, "d/a"), []byte("again"))
}

func testCancelled(t *testing.T, s replica.Store) {
	mustPutIfAbsent(t, s, "c", []byte("data"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.PutIfAbsent(ctx, "c2", bytes.NewReader([]byte("x")), 1); err == nil {
		t.Errorf("PutIfAbsent with a cancelled context succeeded")
	}
	if _, err := s.Put(ctx, "c", bytes.NewReader([]byte("x")), 1); err == nil {
		t.Errorf("Put with a cancelled context succeeded")
	}
	if _, err := s.Stat(ctx, "c"); err == nil {
		t.Errorf("Stat with a cancelled context succeeded")
	}
	if rc, err := s.Get(ctx, "c"); err == nil {
		rc.Close()
		t.Errorf("Get with a cancelled context succeeded")
	}
	if _, err := s.List(ctx, ""); err == nil {
		t.Errorf("List with a cancelled context succeeded")
	}
	if err := s.Delete(ctx, "c"); err == nil {
		t.Errorf("Delete with a cancelled context succeeded")
	}
	equalBytes(t, "object after cancelled calls", mustGet(t, s, "c"), []byte("data"))
	if _, err := s.Stat(context.Background(), "c2"); !errors.Is(err, replica.ErrNotFound) {
		t.Errorf("a cancelled PutIfAbsent left an object: Stat err = %v", err)
	}
}

// EncodeLTX returns a small valid LTX file holding one page for min..max,
// continuing from the pre-apply checksum pre (0 for a snapshot, min == 1).
func EncodeLTX(t testing.TB, min, max ltx.TXID, pre, post ltx.Checksum) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := ltx.NewEncoder(&buf)
	if err != nil {
		t.Fatal(err)
	}
	hdr := ltx.Header{
		Version: ltx.Version, PageSize: 4096, Commit: 1,
		MinTXID: min, MaxTXID: max, PreApplyChecksum: pre,
		Timestamp: time.Now().UnixMilli(),
	}
	if err := enc.EncodeHeader(hdr); err != nil {
		t.Fatalf("encode LTX header %d-%d: %v", min, max, err)
	}
	page := randomBytes(4096, uint64(max))
	if err := enc.EncodePage(ltx.PageHeader{Pgno: 1}, page); err != nil {
		t.Fatalf("encode LTX page: %v", err)
	}
	enc.SetPostApplyChecksum(post)
	if err := enc.Close(); err != nil {
		t.Fatalf("close LTX encoder %d-%d: %v", min, max, err)
	}
	return buf.Bytes()
}

func testLTXLayout(t *testing.T, s replica.Store) {
	ctx := ctxT(t)
	if pos, err := replica.LatestPos(ctx, s); err != nil || !pos.IsZero() {
		t.Fatalf("LatestPos of an empty replica = %v, %v; want zero, nil", pos, err)
	}
	sum := func(i int) ltx.Checksum { return ltx.ChecksumFlag | ltx.Checksum(1000+i) }
	files := map[ltx.TXID][]byte{}
	for txid := ltx.TXID(1); txid <= 5; txid++ {
		var pre ltx.Checksum
		if txid > 1 {
			pre = sum(int(txid - 1))
		}
		data := EncodeLTX(t, txid, txid, pre, sum(int(txid)))
		files[txid] = data
		if _, err := replica.PutLTX(ctx, s, 0, txid, txid, data); err != nil {
			t.Fatalf("PutLTX txid %d: %v", txid, err)
		}
	}
	// A compaction of 1..4 at level 1 and a snapshot of 1..3 at level 9.
	if _, err := replica.PutLTX(ctx, s, 1, 1, 4, EncodeLTX(t, 1, 4, 0, sum(4))); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.PutLTX(ctx, s, replica.SnapshotLevel, 1, 3, EncodeLTX(t, 1, 3, 0, sum(3))); err != nil {
		t.Fatal(err)
	}
	// A second writer for TXID 5 is refused: one history.
	_, err := replica.PutLTX(ctx, s, 0, 5, 5, EncodeLTX(t, 5, 5, sum(4), ltx.ChecksumFlag|99))
	if !errors.Is(err, replica.ErrExists) {
		t.Fatalf("PutLTX of a taken TXID: err = %v, want ErrExists", err)
	}

	l0, err := replica.ListLTX(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l0) != 5 {
		t.Fatalf("ListLTX level 0 = %d files, want 5: %+v", len(l0), l0)
	}
	for i, f := range l0 {
		want := ltx.TXID(i + 1)
		if f.MinTXID != want || f.MaxTXID != want || f.Size != int64(len(files[want])) {
			t.Errorf("level 0 file %d = %+v, want TXID %d size %d", i, f, want, len(files[want]))
		}
	}
	if l1, err := replica.ListLTX(ctx, s, 1); err != nil || len(l1) != 1 || l1[0].MaxTXID != 4 {
		t.Errorf("ListLTX level 1 = %+v, %v; want one file 1-4", l1, err)
	}
	if l9, err := replica.ListLTX(ctx, s, 9); err != nil || len(l9) != 1 || l9[0].MinTXID != 1 || l9[0].MaxTXID != 3 {
		t.Errorf("ListLTX level 9 = %+v, %v; want one file 1-3", l9, err)
	}
	hdr, err := replica.ReadHeader(ctx, s, l0[2])
	if err != nil || hdr.MinTXID != 3 || hdr.PreApplyChecksum != sum(2) {
		t.Errorf("ReadHeader of TXID 3 = %+v, %v", hdr, err)
	}
	pos, err := replica.LatestPos(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if pos.TXID != 5 || pos.PostApplyChecksum != sum(5) {
		t.Errorf("LatestPos = %v, want TXID 5 checksum %v", pos, sum(5))
	}
	// The file decodes intact after the round trip.
	dec := ltx.NewDecoder(bytes.NewReader(mustGet(t, s, l0[4].Key)))
	if err := dec.Verify(); err != nil {
		t.Errorf("LTX file %s fails verification after the round trip: %v", l0[4].Key, err)
	}
}
