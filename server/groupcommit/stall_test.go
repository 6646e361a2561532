package groupcommit

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/watch"
	"github.com/sluicedb/sluice/server/dberr"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// hangingStore holds every upload from hang until release, as a paused
// store does: the request neither fails nor succeeds.
type hangingStore struct {
	replica.Store
	mu   sync.Mutex
	gate chan struct{} // nil: uploads pass
}

func (s *hangingStore) hang() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *hangingStore) release() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func (s *hangingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return replica.ObjectInfo{}, ctx.Err()
		}
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// TestWritesOnAHungStoreAreAnsweredWithinTheStallTimeout: while the store
// hangs, writes already committed are answered COMMITTED_NOT_DURABLE within
// the write stall timeout (and ship once the store answers), writes not run
// yet are refused UNAVAILABLE (and never applied), new writes are refused at
// once, and writes succeed again as soon as the store answers.
func TestWritesOnAHungStoreAreAnsweredWithinTheStallTimeout(t *testing.T) {
	store := &hangingStore{Store: newFileStore(t)}
	const threshold, stallTimeout = 300 * time.Millisecond, 800 * time.Millisecond
	w := watch.New(store, time.Minute).SetStallThreshold(threshold)
	db := openDB(t, store, func(o *Options) {
		o.Stall, o.WriteStallTimeout, o.UploadTimeout = w, stallTimeout, time.Minute
	})
	write(t, db, "CREATE TABLE t (id INTEGER PRIMARY KEY)")

	insert := func(id int64) (time.Duration, error) {
		start := time.Now()
		_, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
			_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (?)", Args: []sqlconn.Value{{Type: sqlconn.Integer, Int: id}}})
			return err
		})
		return time.Since(start), err
	}
	store.hang()
	type answer struct {
		id   int64
		took time.Duration
		err  error
	}
	answers := make(chan answer, 20)
	for id := int64(1); id <= 20; id++ {
		go func() {
			took, err := insert(id)
			answers <- answer{id, took, err}
		}()
		time.Sleep(20 * time.Millisecond)
	}
	notDurable, refused := map[int64]bool{}, map[int64]bool{}
	for range 20 {
		a := <-answers
		var nd *NotDurableError
		switch e := dberr.As(a.err); {
		case errors.As(a.err, &nd):
			notDurable[a.id] = true
		case e != nil && e.Code == dberr.CodeUnavailable:
			refused[a.id] = true
		default:
			t.Fatalf("write %d on a hung store: %v after %s, want COMMITTED_NOT_DURABLE or UNAVAILABLE", a.id, a.err, a.took)
		}
		if limit := stallTimeout + 700*time.Millisecond; a.took > limit {
			t.Errorf("write %d answered after %s, want within %s (write stall timeout %s)", a.id, a.took, limit, stallTimeout)
		}
	}
	if len(notDurable) == 0 || len(refused) == 0 {
		t.Fatalf("%d answered not durable, %d refused: want both (the first write commits, later ones are refused)", len(notDurable), len(refused))
	}
	took, err := insert(100)
	if e := dberr.As(err); e == nil || e.Code != dberr.CodeUnavailable || took > 200*time.Millisecond {
		t.Fatalf("a new write on a stalled store: %v after %s, want UNAVAILABLE at once", err, took)
	}

	store.release()
	deadline := time.Now().Add(10 * time.Second)
	for w.Stalled() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := insert(200); err != nil {
		t.Fatalf("write after the store answers again: %v", err)
	}
	// Every committed write shipped; no refused write was applied.
	want := int64(len(notDurable) + 1)
	if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != want {
		t.Fatalf("restored %d rows, want %d (%d committed while hung + 1 after)", got, want, len(notDurable))
	}
	for id := range refused {
		if n := queryInt(t, db, "SELECT count(*) FROM t WHERE id = "+strconv.FormatInt(id, 10)); n != 0 {
			t.Fatalf("write %d was answered UNAVAILABLE (not run) but is in the database", id)
		}
	}
	t.Logf("hung store: %d writes committed and answered not durable, %d refused unrun; restored %d rows", len(notDurable), len(refused), want)
}

// TestBurstCommittedDuringAStalledUploadIsAnsweredInTime: a burst of writes
// right as the store hangs fills groups that commit while the first upload
// is stuck (they do not share it). Those are answered within the write stall
// timeout too, COMMITTED_NOT_DURABLE with a bookmark the restore reaches, and
// every write so answered is in the replica once the store answers.
func TestBurstCommittedDuringAStalledUploadIsAnsweredInTime(t *testing.T) {
	store := &hangingStore{Store: newFileStore(t)}
	const threshold, stallTimeout = 400 * time.Millisecond, 800 * time.Millisecond
	w := watch.New(store, time.Minute).SetStallThreshold(threshold)
	db := openDB(t, store, func(o *Options) {
		o.Stall, o.WriteStallTimeout, o.UploadTimeout = w, stallTimeout, time.Minute
	})
	write(t, db, "CREATE TABLE t (id INTEGER PRIMARY KEY)")
	store.hang()
	const n = 300
	type answer struct {
		id   int64
		took time.Duration
		err  error
	}
	answers := make(chan answer, n)
	for id := int64(1); id <= n; id++ {
		go func() {
			start := time.Now()
			_, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
				_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (?)", Args: []sqlconn.Value{{Type: sqlconn.Integer, Int: id}}})
				return err
			})
			answers <- answer{id, time.Since(start), err}
		}()
	}
	notDurable, refused := map[int64]bool{}, 0
	bookmarks := map[uint64]int{}
	for range n {
		a := <-answers
		var nd *NotDurableError
		switch e := dberr.As(a.err); {
		case errors.As(a.err, &nd):
			notDurable[a.id] = true
			bookmarks[uint64(nd.TXID)]++
		case e != nil && e.Code == dberr.CodeUnavailable:
			refused++
		default:
			t.Fatalf("write %d: %v, want COMMITTED_NOT_DURABLE or UNAVAILABLE", a.id, a.err)
		}
		if limit := stallTimeout + time.Second; a.took > limit {
			t.Errorf("write %d answered after %s, want within %s", a.id, a.took, limit)
		}
	}
	store.release()
	deadline := time.Now().Add(10 * time.Second)
	for w.Stalled() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := db.Submit(context.Background(), func(c sqlconn.Conn) error { return nil }); err != nil {
		t.Fatalf("a write after the store answers: %v", err)
	}
	if got := restoredCount(t, store, "SELECT count(*) FROM t"); got != int64(len(notDurable)) {
		t.Fatalf("restored %d rows, want the %d answered COMMITTED_NOT_DURABLE", got, len(notDurable))
	}
	pos := uint64(db.rep.Pos().TXID)
	for b := range bookmarks {
		if b > pos {
			t.Errorf("bookmark %d given to a committed write is past the durable position %d after everything shipped", b, pos)
		}
	}
	t.Logf("burst on a hung store: %d committed (writes per bookmark %v), %d refused unrun", len(notDurable), bookmarks, refused)
}
