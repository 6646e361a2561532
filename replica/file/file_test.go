package file_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
	"github.com/sluicedb/sluice/replica/replicatest"
)

func newStore(t *testing.T) replica.Store {
	s, err := file.New(filepath.Join(t.TempDir(), "root", "not", "yet", "created"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	replicatest.RunConformance(t, newStore)
}

// No temp or lock file is left behind and List never shows them.
func TestNoLeftovers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t).(*file.Store)
	if _, err := s.PutIfAbsent(ctx, "a/b", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(ctx, "a/b", strings.NewReader("y"), 1); !errors.Is(err, replica.ErrExists) {
		t.Fatalf("err = %v, want ErrExists", err)
	}
	info, err := s.Stat(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfMatch(ctx, "a/b", strings.NewReader("z"), 1, "stale"); !errors.Is(err, replica.ErrPreconditionFailed) {
		t.Fatalf("err = %v, want ErrPreconditionFailed", err)
	}
	if _, err := s.PutIfMatch(ctx, "a/b", strings.NewReader("z"), 1, info.ETag); err != nil {
		t.Fatal(err)
	}
	// A wrong declared size is refused and leaves nothing.
	if _, err := s.PutIfAbsent(ctx, "a/c", strings.NewReader("xyz"), 5); err == nil {
		t.Fatal("PutIfAbsent with a wrong size succeeded")
	}
	var names []string
	filepath.WalkDir(s.Root(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(s.Root(), p)
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if strings.Join(names, ",") != ".sluice-store.lock,a/b" {
		t.Errorf("files under the root = %v, want only the lock file and a/b", names)
	}
	objs, err := s.List(ctx, "")
	if err != nil || len(objs) != 1 || objs[0].Key != "a/b" {
		t.Errorf("List = %+v, %v; want only a/b", objs, err)
	}
}

// Two Store values on one directory (as two processes would have) serialise
// their compare-and-swaps through the flock: N increments, none lost.
func TestPutIfMatchAcrossInstances(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, _ := file.New(dir)
	b, _ := file.New(dir)
	if _, err := a.PutIfAbsent(ctx, "counter", bytes.NewReader([]byte{0}), 1); err != nil {
		t.Fatal(err)
	}
	const perWriter = 40
	var wg sync.WaitGroup
	for _, s := range []*file.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < perWriter; {
				info, err := s.Stat(ctx, "counter")
				if err != nil {
					t.Error(err)
					return
				}
				rc, err := s.Get(ctx, "counter")
				if err != nil {
					t.Error(err)
					return
				}
				var v [1]byte
				rc.Read(v[:])
				rc.Close()
				// The ETag is a content hash: re-check it matches what we read.
				if _, err := s.PutIfMatch(ctx, "counter", bytes.NewReader([]byte{v[0] + 1}), 1, info.ETag); errors.Is(err, replica.ErrPreconditionFailed) {
					continue
				} else if err != nil {
					t.Error(err)
					return
				}
				done++
			}
		}()
	}
	wg.Wait()
	rc, err := a.Get(ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var v [1]byte
	rc.Read(v[:])
	if v[0] != 4*perWriter {
		t.Errorf("counter = %d after %d compare-and-swap increments, want %d", v[0], 4*perWriter, 4*perWriter)
	}
}

func TestInvalidKeys(t *testing.T) {
	s := newStore(t)
	for _, k := range []string{"", "/abs", "../escape", "a/../../b", "a//b", ".tmp-x", "a/.tmp-y"} {
		if _, err := s.PutIfAbsent(context.Background(), k, strings.NewReader("x"), 1); err == nil {
			t.Errorf("PutIfAbsent(%q) succeeded, want an invalid-key error", k)
		}
	}
}
