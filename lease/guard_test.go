package lease

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

func put(store replica.Store, key, body string) error {
	_, err := store.PutIfAbsent(context.Background(), key, strings.NewReader(body), int64(len(body)))
	return err
}

// While the lease holds, the guard is invisible: writes and reads pass.
func TestGuardPassesWritesWhileHeld(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := TryAcquire(ctx, store, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	g := GuardStore(store, l)
	key := replica.LTXKey(0, 1, 1)
	if err := put(g, key, "one"); err != nil {
		t.Fatalf("write under a held lease: %v", err)
	}
	if err := put(g, key, "again"); !errors.Is(err, replica.ErrExists) || errors.Is(err, ErrLost) {
		t.Fatalf("second create of %s = %v, want the store's own ErrExists", key, err)
	}
	if err := g.Delete(ctx, key); err != nil {
		t.Fatalf("delete under a held lease: %v", err)
	}
}

// Once the lease is taken by another holder, every write is refused before
// it reaches the store, and a history object's refusal reads as fenced.
func TestGuardRefusesWritesAfterLoss(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := TryAcquire(ctx, store, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	g := GuardStore(store, l)
	kept := replica.LTXKey(0, 1, 1)
	if err := put(g, kept, "one"); err != nil {
		t.Fatal(err)
	}
	body := encode(Record{Holder: "intruder", Epoch: 9, Expires: time.Now().Add(time.Hour)})
	if _, err := store.Put(ctx, Key, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(2 * testTTL):
		t.Fatal("holder did not notice the lease was taken")
	}

	next := replica.LTXKey(0, 2, 2)
	err = put(g, next, "two")
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Key != next || !errors.Is(err, ErrLost) || !errors.Is(err, replica.ErrExists) {
		t.Fatalf("history create after loss = %v, want a *RefusedError matching ErrLost and replica.ErrExists", err)
	}
	if _, serr := store.Stat(ctx, next); !errors.Is(serr, replica.ErrNotFound) {
		t.Fatalf("refused create reached the store: stat = %v", serr)
	}
	other := replica.SluiceDir + "/probe"
	if _, err := g.Put(ctx, other, strings.NewReader("x"), 1); !errors.Is(err, ErrLost) || errors.Is(err, replica.ErrExists) {
		t.Fatalf("non-history put after loss = %v, want ErrLost only", err)
	}
	if _, err := g.PutIfMatch(ctx, kept, strings.NewReader("x"), 1, "etag"); !errors.Is(err, ErrLost) {
		t.Fatalf("replace after loss = %v, want ErrLost", err)
	}
	if err := g.Delete(ctx, kept); !errors.Is(err, ErrLost) {
		t.Fatalf("delete after loss = %v, want ErrLost", err)
	}
	rc, err := g.Get(ctx, kept)
	if err != nil {
		t.Fatalf("read after loss: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "one" {
		t.Fatalf("read %q after loss, want the object untouched", got)
	}
}

// A released lease guards like a lost one: the next holder owns the history.
func TestGuardRefusesWritesAfterRelease(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := TryAcquire(ctx, store, opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := put(GuardStore(store, l), replica.LTXKey(0, 1, 1), "one"); !errors.Is(err, ErrLost) || !errors.Is(err, replica.ErrExists) {
		t.Fatalf("create after release = %v, want refused as fenced", err)
	}
}
