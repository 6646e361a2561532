package push

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/lease"
	"github.com/sluicedb/sluice/replica/file"
)

// heldLease takes a lease on a fresh file store.
func heldLease(t *testing.T) *lease.Lease {
	t.Helper()
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := lease.TryAcquire(context.Background(), store, lease.Options{Holder: "writer", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return l
}

// recorder collects a Client's events.
type recorder struct {
	mu       sync.Mutex
	shipped  []uint64
	released int
	ended    int
	changed  chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1000)} }

func (r *recorder) events() Events {
	note := func(f func()) { r.mu.Lock(); f(); r.mu.Unlock(); r.changed <- struct{}{} }
	return Events{
		Shipped:  func(txid uint64) { note(func() { r.shipped = append(r.shipped, txid) }) },
		Released: func() { note(func() { r.released++ }) },
		Ended:    func() { note(func() { r.ended++ }) },
	}
}

func (r *recorder) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		r.mu.Lock()
		done := ok()
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A subscriber hears every shipped TXID in order, then "released" once
// the lease is written free, and the hub forgets it.
func TestSubscriberHearsShippedTXIDsThenTheRelease(t *testing.T) {
	l := heldLease(t)
	hub := NewHub(0, 0)
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if err := hub.Serve(w, r, "app", l, nil); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	c := &Client{Token: func(string) string { return "secret" }}
	go c.Follow(ctx, "app", func(context.Context) (string, error) { return srv.URL, nil }, rec.events())
	for hub.Subscribers() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	for txid := uint64(1); txid <= 100; txid++ {
		hub.Shipped("app", txid)
		hub.Shipped("other", 1000+txid) // another database's subscribers only
	}
	rec.waitFor(t, "100 shipped TXIDs", func() bool { return len(rec.shipped) == 100 })
	for i, txid := range rec.shipped {
		if txid != uint64(i+1) {
			t.Fatalf("shipped[%d] = %d: out of order or another database's", i, txid)
		}
	}
	if auth != "Bearer secret" {
		t.Fatalf("the subscription carried Authorization %q", auth)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "released", func() bool { return rec.released == 1 })
	for deadline := time.Now().Add(5 * time.Second); hub.Subscribers() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the hub still counts %d subscribers after the release", hub.Subscribers())
		}
	}
}

// A waiter's subscription hears, with the release, the record the release
// wrote and its ETag, exactly as the bucket holds them (so its conditional
// replace needs no read first), including the position released at.
func TestReleaseTellsTheRecordAndItsETag(t *testing.T) {
	store, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := lease.TryAcquire(ctx, store, lease.Options{Holder: "writer", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hub := NewHub(0, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := hub.Serve(w, r, "app", l, nil); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	type told struct {
		rec  *lease.Record
		etag string
	}
	got := make(chan told, 1)
	c := &Client{}
	go c.Follow(ctx, "app", func(context.Context) (string, error) { return srv.URL, nil }, Events{
		ReleasedAs: func(rec *lease.Record, etag string) { got <- told{rec, etag} },
	})
	for hub.Subscribers() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.ReleaseAt(ctx, lease.Final{TXID: 7, Checksum: 99}); err != nil {
		t.Fatal(err)
	}
	var g told
	select {
	case g = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no release heard")
	}
	stored, etag, err := lease.Read(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if g.rec == nil || g.etag != etag {
		t.Fatalf("told record %+v with ETag %q; the bucket's ETag is %q", g.rec, g.etag, etag)
	}
	if !g.rec.Released() || g.rec.Holder != stored.Holder || g.rec.Epoch != stored.Epoch ||
		g.rec.Final == nil || *g.rec.Final != (lease.Final{TXID: 7, Checksum: 99}) {
		t.Fatalf("told record %+v, the bucket holds %+v", *g.rec, stored)
	}
}

// A subscriber that stops reading is cut once its queue is full; the
// writer's Shipped never blocks. Past the limits a subscription is refused.
func TestSlowSubscriberIsCutAndLimitsHold(t *testing.T) {
	l := heldLease(t)
	hub := NewHub(1, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := hub.Serve(w, r, "app", l, nil); err != nil {
			var full ErrFull
			if !errors.As(err, &full) {
				t.Errorf("Serve: %v", err)
			}
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL) // never read: a stalled follower
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for hub.Subscribers() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	second, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	second.Body.Close()
	if second.StatusCode != 503 {
		t.Fatalf("a second subscriber past the per-database limit of 1 got %d", second.StatusCode)
	}
	start := time.Now()
	for txid := uint64(1); txid <= 200_000; txid++ {
		hub.Shipped("app", txid)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("200,000 Shipped calls took %s: the writer waited for a stalled subscriber", d)
	}
	for deadline := time.Now().Add(5 * time.Second); hub.Subscribers() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled subscriber was not cut")
		}
	}
}

// A client whose stream is cut says so (Ended) and subscribes again; it
// never subscribes to itself, and stops with its context.
func TestClientReconnectsAfterACut(t *testing.T) {
	l := heldLease(t)
	hub := NewHub(0, 0)
	var mu sync.Mutex
	streams := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		streams++
		mu.Unlock()
		hub.Serve(w, r, "app", l, nil)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder()
	done := make(chan struct{})
	go func() {
		(&Client{}).Follow(ctx, "app", func(context.Context) (string, error) { return srv.URL, nil }, rec.events())
		close(done)
	}()
	for hub.Subscribers() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	srv.CloseClientConnections()
	rec.waitFor(t, "the cut stream's end", func() bool { return rec.ended >= 1 })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := streams
		mu.Unlock()
		if n >= 2 && hub.Subscribers() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client did not subscribe again after the cut (%d streams)", n)
		}
	}
	hub.Shipped("app", 7)
	rec.waitFor(t, "a TXID on the new stream", func() bool { return len(rec.shipped) == 1 && rec.shipped[0] == 7 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}

	self := &Client{Self: srv.URL + "/"}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	mu.Lock()
	before := streams
	mu.Unlock()
	self.Follow(ctx2, "app", func(context.Context) (string, error) { return srv.URL, nil }, Events{})
	mu.Lock()
	after := streams
	mu.Unlock()
	if after != before {
		t.Fatal("a client subscribed to its own URL")
	}
	if !strings.HasSuffix(Path("a b"), "/a%20b/shipped") {
		t.Fatalf("Path escapes badly: %s", Path("a b"))
	}
}

// The hub names as successor only a subscriber that said it waits for the
// lease, whose stream is open, the newest such one that accept takes.
func TestSuccessorIsTheNewestWaiterStillSubscribed(t *testing.T) {
	l := heldLease(t)
	hub := NewHub(0, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var waiter *lease.Successor
		if h := r.Header.Get(HeaderWaiter); h != "" {
			waiter = &lease.Successor{}
			if err := json.Unmarshal([]byte(h), waiter); err != nil {
				t.Errorf("waiter header %q: %v", h, err)
			}
		}
		if err := hub.Serve(w, r, "app", l, waiter); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	follow := func(waiter *lease.Successor) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		n := hub.Subscribers()
		go (&Client{}).FollowAs(ctx, "app", func(context.Context) (string, error) { return srv.URL, nil }, Events{}, waiter)
		for hub.Subscribers() == n {
			time.Sleep(5 * time.Millisecond)
		}
		return cancel
	}
	if _, ok := hub.Successor("app", nil); ok {
		t.Fatal("a successor with no subscriber")
	}
	stopFollower := follow(nil)
	defer stopFollower()
	if s, ok := hub.Successor("app", nil); ok {
		t.Fatalf("a follower named successor: %+v", s)
	}
	stopOld := follow(&lease.Successor{Holder: "old", URL: "http://old"})
	stopNew := follow(&lease.Successor{Holder: "new", URL: "http://new"})
	if s, ok := hub.Successor("app", nil); !ok || s.Holder != "new" {
		t.Fatalf("successor %+v, %v; want the newest waiter", s, ok)
	}
	if s, ok := hub.Successor("app", func(s lease.Successor) bool { return s.Holder == "old" }); !ok || s.Holder != "old" {
		t.Fatalf("successor %+v, %v; want the one accept takes", s, ok)
	}
	if _, ok := hub.Successor("other", nil); ok {
		t.Fatal("a successor for another database")
	}
	stopNew()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, ok := hub.Successor("app", nil); ok && s.Holder == "old" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a waiter that went away is still named successor")
		}
	}
	stopOld()
}
