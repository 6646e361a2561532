package stream

import (
	"testing"
	"time"

	"github.com/sluicedb/sluice/server/dbhost"
)

// nameOnly is a database the registry's memory of streams only names.
type nameOnly struct {
	dbhost.Database
	name string
}

func (d nameOnly) Name() string { return d.name }

func idleStream(n byte, owner string) *Stream {
	s := &Stream{db: nameOnly{name: "d"}, owner: owner, seq: 7}
	s.id[0], s.id[1] = n, owner[0]
	return s
}

func TestRememberedStreamsAreBoundedPerOwnerAndInAll(t *testing.T) {
	r := NewRegistry(Config{MaxStreamsPerToken: 3})
	defer r.Close()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range 5 {
		r.rememberClean(idleStream(byte(i), "a"), now)
	}
	r.rememberClean(idleStream(0, "b"), now)
	if len(r.resumables) != 4 || r.resumableOwners["a"] != 3 || r.resumableOwners["b"] != 1 {
		t.Fatalf("remembered %d (a: %d, b: %d); want a's first 3 and b's 1", len(r.resumables), r.resumableOwners["a"], r.resumableOwners["b"])
	}
	// Held something: not remembered.
	held := idleStream(9, "b")
	held.sqls = map[int32]string{1: "SELECT 1"}
	r.rememberClean(held, now)
	if len(r.resumables) != 4 {
		t.Fatal("a stream holding stored SQL was remembered")
	}
	// Continued, then gone from memory; the wrong sequence continues nothing.
	db := nameOnly{name: "d"}
	first := idleStream(0, "a")
	if s, e := r.resume(first.id, 6, db, "a"); s != nil || e != nil {
		t.Fatal("an older baton continued a remembered stream")
	}
	if s, e := r.resume(first.id, 7, db, "a"); s == nil || e != nil {
		t.Fatalf("the last baton did not continue its stream: %v", e)
	}
	if _, ok := r.resumables[first.id]; ok || r.resumableOwners["a"] != 2 {
		t.Fatal("a continued stream is still remembered")
	}
	// A day later, all forgotten.
	r.trimResumables(now.Add(resumeFor + time.Minute))
	if len(r.resumables) != 0 || len(r.resumableOwners) != 0 || len(r.resumeQueue) != 0 {
		t.Fatalf("after a day: %d remembered, %d owners, %d queued", len(r.resumables), len(r.resumableOwners), len(r.resumeQueue))
	}
}

// A stream that idles out and is continued over and over leaves no trail
// behind an older remembered one.
func TestTheQueueOfRememberedStreamsStaysBounded(t *testing.T) {
	r := NewRegistry(Config{})
	defer r.Close()
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rememberClean(idleStream(1, "old"), now) // stays at the front
	busy := idleStream(2, "app")
	db := nameOnly{name: "d"}
	for i := range 20000 {
		r.rememberClean(busy, now.Add(time.Duration(i)*time.Millisecond))
		s, e := r.resume(busy.id, busy.seq, db, "app")
		if s == nil || e != nil {
			t.Fatalf("cycle %d: not continued: %v", i, e)
		}
		r.forget(s) // its next idle-out
	}
	if len(r.resumeQueue) > 2*len(r.resumables)+1024 {
		t.Fatalf("%d queued for %d remembered", len(r.resumeQueue), len(r.resumables))
	}
}
