package libsqlsync

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A file shipped without its body (a large one the shipper did not keep)
// leaves the window starting after it; the replicas that bootstrapped at
// it would get the whole database. Filled from the bucket, the window
// starts at it again and they get the pages changed since; once a client
// was told to walk past the start, it is never moved back.
func TestHistoryFillsAFileShippedWithoutItsBody(t *testing.T) {
	h := NewHistory(0)
	f1, b1 := ltxFile(t, 1, 1, 3, map[uint32]byte{1: 'a', 2: 'a', 3: 'a'})
	h.Shipped("db", f1, b1)
	f2, b2 := ltxFile(t, 2, 2, 3, map[uint32]byte{2: 'b', 3: 'b'})
	h.Shipped("db", f2, nil) // too large to keep
	f3, b3 := ltxFile(t, 3, 3, 3, map[uint32]byte{3: 'c'})
	h.Shipped("db", f3, b3)
	if v := h.view("db", 3); v.from != 3 || v.head != 3 {
		t.Fatalf("window %d..%d, want 3..3", v.from, v.head)
	}
	if !h.gapAt("db", 2) || h.gapAt("db", 1) {
		t.Fatal("the file without a body is not the one to fill")
	}
	if h.fill("db", 2, b3) {
		t.Fatal("another TXID's file was accepted as TXID 2's")
	}
	if !h.fill("db", 2, b2) {
		t.Fatal("TXID 2's file was not put back")
	}
	if v := h.view("db", 3); v.from != 2 {
		t.Fatalf("window starts at %d after the fill, want 2", v.from)
	}
	pages, _, _, ok := h.diff("db", 1)
	if !ok || len(pages) != 2 || !bytes.Equal(pages[2], bytes.Repeat([]byte{'b'}, PageSize)) || !bytes.Equal(pages[3], bytes.Repeat([]byte{'c'}, PageSize)) {
		t.Fatalf("diff after TXID 1: ok %v, %d pages", ok, len(pages))
	}

	// A walk past the start forbids moving it back.
	h2 := NewHistory(0)
	h2.Shipped("db", f1, b1)
	h2.Shipped("db", f2, nil)
	h2.walked("db")
	if h2.gapAt("db", 2) || h2.fill("db", 2, b2) {
		t.Fatal("the window moved back after a client walked past its start")
	}
}

// The memory of which client is where forgets its oldest generations
// first: clients in the newest generation keep receiving only what
// changed when replicas in old generations fill the bound.
func TestHistoryForgetsOldGenerationsFirst(t *testing.T) {
	h := NewHistory(0)
	f1, b1 := ltxFile(t, 1, 1, 1, map[uint32]byte{1: 'a'})
	h.Shipped("db", f1, b1)
	for i := range uint64(memoLimit - 10) {
		h.reach("db", 5, i+1, 6)
	}
	for i := range uint64(20) {
		h.reach("db", 9, i+1, 10)
	}
	if n, ok := h.reachedBy("db", 9, 20); !ok || n != 10 {
		t.Fatalf("generation 9 forgotten: %d %v", n, ok)
	}
	if _, ok := h.reachedBy("db", 5, 3); ok {
		t.Fatal("generation 5 still remembered past the bound")
	}
	if d := h.dbs["db"]; len(d.reached) > memoLimit/2 || d.memoFrom != 5 {
		t.Fatalf("%d remembered, memoFrom %d", len(d.reached), d.memoFrom)
	}
}

// A wait in the sync URL is taken off the path and given to Sync; a bad
// one is refused, naming the form.
func TestWaitPathStripsTheWait(t *testing.T) {
	for path, want := range map[string]string{
		"/db/app/wait/5s/sync/3/1/2":  "/db/app/sync/3/1/2 5s",
		"/db/app/wait/250ms//info":    "/db/app//info 250ms",
		"/db/app/wait/1s/v2/pipeline": "/db/app/v2/pipeline 1s",
		"/db/app/sync/3/1/2":          "/db/app/sync/3/1/2 0s",
		"/db/app/wait/forever/info":   "refused",
		"/db/app/wait/1h/info":        "refused",
	} {
		got := ""
		h := WaitPath(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.URL.Path + " " + waitOf(r.Context()).String()
		}), func(w http.ResponseWriter, r *http.Request, err error) {
			if strings.Contains(err.Error(), "/wait/5s/") {
				got = "refused"
			}
		})
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
		if got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// Waiting syncs are bounded: past MaxWaiting held at once, a sync is
// answered at once, as without a wait; below it, it waits.
func TestWaitingSyncsAreBounded(t *testing.T) {
	h := New(Options{Dir: t.TempDir()})
	never := make(chan struct{})
	v := view{changed: never}
	wait := func() time.Duration {
		start := time.Now()
		if h.waitForNext(context.Background(), v, time.Now().Add(300*time.Millisecond)) {
			t.Fatal("waitForNext reported a change that never came")
		}
		return time.Since(start)
	}
	if d := wait(); d < 250*time.Millisecond {
		t.Fatalf("below the bound a sync waited %s, want the whole 300ms", d)
	}
	h.waiting.Store(MaxWaiting)
	if d := wait(); d > 100*time.Millisecond {
		t.Fatalf("with %d syncs waiting another one waited %s, want an answer at once", MaxWaiting, d)
	}
	if n := h.waiting.Load(); n != MaxWaiting {
		t.Fatalf("the refused wait left the count at %d, want %d", n, MaxWaiting)
	}
}
