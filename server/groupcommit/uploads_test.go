package groupcommit

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// Slots go to waiters in arrival order, and never more than the bound at once.
func TestUploadSlotsAreFIFOAndBounded(t *testing.T) {
	s := NewUploadSlots(2)
	a, b := s.acquire(), s.acquire()
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		default:
			t.Fatal("a free slot was not granted at once")
		}
	}
	var waiting []<-chan struct{}
	for range 3 {
		waiting = append(waiting, s.acquire())
	}
	granted := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	for i, ch := range waiting {
		if granted(ch) {
			t.Fatalf("waiter %d granted with both slots held", i)
		}
	}
	s.release()
	if !granted(waiting[0]) || granted(waiting[1]) || granted(waiting[2]) {
		t.Fatal("a released slot must go to the first waiter only")
	}
	s.release()
	s.release()
	if !granted(waiting[1]) || !granted(waiting[2]) {
		t.Fatal("released slots must go to the next waiters in order")
	}
	s.release()
	s.release()
	if s.free != 2 || len(s.waiters) != 0 {
		t.Fatalf("free %d waiters %d after every release, want 2 and 0", s.free, len(s.waiters))
	}
}

// uploadCounter counts write-path uploads in flight and at most at once,
// holding each one for a while so that they overlap.
type uploadCounter struct {
	hold          time.Duration
	inFlight, max atomic.Int32
	puts          atomic.Int32 // counted when an upload starts
	landed        atomic.Int32 // counted when the store has accepted it
}

// countingStore counts its uploads with a counter it may share with others.
type countingStore struct {
	replica.Store
	*uploadCounter
}

func (s *countingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	if strings.Contains(key, "ltx/") {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for m := s.max.Load(); n > m && !s.max.CompareAndSwap(m, n); m = s.max.Load() {
		}
		s.puts.Add(1)
		time.Sleep(s.hold)
		info, err := s.Store.PutIfAbsent(ctx, key, r, size)
		if err == nil {
			s.landed.Add(1)
		}
		return info, err
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// Many databases writing at once never have more uploads in flight than
// their shared slots allow, every write is acknowledged, and each database's bucket holds
// exactly its acknowledged rows.
func TestUploadsAcrossDatabasesAreBounded(t *testing.T) {
	counter := &uploadCounter{hold: 20 * time.Millisecond}
	slots := NewUploadSlots(2)
	const dbs, writers, each = 8, 3, 5
	bases := make([]replica.Store, dbs)
	opened := make([]*testDB, dbs)
	for i := range opened {
		bases[i] = newFileStore(t)
		opened[i] = openDB(t, &countingStore{Store: bases[i], uploadCounter: counter}, func(o *Options) { o.Uploads = slots })
		write(t, opened[i], "CREATE TABLE t(x)")
	}
	var wg sync.WaitGroup
	errs := make(chan error, dbs*writers)
	for _, db := range opened {
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
						_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (1)"})
						return err
					}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := counter.max.Load(); m > 2 {
		t.Fatalf("%d uploads in flight at once, want at most the 2 slots", m)
	}
	if p := counter.puts.Load(); p >= dbs*writers*each {
		t.Fatalf("%d uploads for %d writes: waiting for a slot should have grouped them", p, dbs*writers*each)
	}
	for i, base := range bases {
		if got := restoredCount(t, base, "SELECT count(*) FROM t"); got != writers*each {
			t.Fatalf("database %d: bucket holds %d rows, want the %d acknowledged", i, got, writers*each)
		}
	}
}

// Shipping commits another process made to the file takes an upload slot
// like any write: while every slot is held, the poll uploads nothing; once
// one is free, the commit reaches the bucket.
func TestExternalCommitsWaitForAnUploadSlot(t *testing.T) {
	counter := &uploadCounter{}
	slots := NewUploadSlots(1)
	base := newFileStore(t)
	db := openDB(t, &countingStore{Store: base, uploadCounter: counter}, func(o *Options) {
		o.Uploads = slots
		o.ExternalPoll = 10 * time.Millisecond
	})
	write(t, db, "CREATE TABLE t(x)")
	before := counter.puts.Load()

	<-slots.acquire() // every slot is busy with other databases' uploads
	other, err := sqlconn.Open(db.path, sqlconn.OwnWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = other.Run("INSERT INTO t VALUES ('from another process')")
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // 20 polls
	if n := counter.puts.Load() - before; n != 0 {
		t.Fatalf("%d uploads while the only slot was held", n)
	}
	landed := counter.landed.Load()
	slots.release()
	// Restore once the upload has landed, not merely started.
	deadline := time.Now().Add(5 * time.Second)
	for counter.landed.Load() == landed && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := restoredCount(t, base, "SELECT count(*) FROM t"); got != 1 {
		t.Fatalf("bucket holds %d rows after the slot was freed, want the other process's 1", got)
	}
}

// With a commit window, writes committed within it of each other share one
// upload; each is acknowledged only once that upload is in the bucket.
func TestCommitWindowSharesOneUpload(t *testing.T) {
	base := newFileStore(t)
	store := &countingStore{Store: base, uploadCounter: &uploadCounter{}}
	const window = 400 * time.Millisecond
	db := openDB(t, store, func(o *Options) { o.CommitWindow = window })
	write(t, db, "CREATE TABLE t(x)")
	before := store.puts.Load()
	var wg sync.WaitGroup
	took := make([]time.Duration, 4)
	for i := range took {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			write(t, db, "INSERT INTO t VALUES (?)", sqlconn.Value{Type: sqlconn.Integer, Int: int64(i)})
			took[i] = time.Since(start)
		}()
		time.Sleep(40 * time.Millisecond) // one after the other, well inside the window
	}
	wg.Wait()
	if n := store.puts.Load() - before; n != 1 {
		t.Fatalf("%d uploads for 4 writes inside one commit window, want 1", n)
	}
	if took[0] < window {
		t.Fatalf("the first write was acknowledged after %s, before its commit window (%s) ended", took[0], window)
	}
	if got := restoredCount(t, base, "SELECT count(*) FROM t"); got != 4 {
		t.Fatalf("bucket holds %d rows, want the 4 acknowledged", got)
	}
}

// lineCounter counts log records whose message contains a phrase.
type lineCounter struct {
	phrase string
	n      atomic.Int64
}

func (h *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.phrase) {
		h.n.Add(1)
	}
	return nil
}
func (h *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineCounter) WithGroup(string) slog.Handler      { return h }

// The idle poll for other processes' commits never takes the writer's own
// commit, made between its check and the group reaching the shipper, for
// another process's: an operator reading "another process" would look for
// an intruder. A real other process's commit is still named.
func TestOwnCommitsAreNotReportedAsAnotherProcess(t *testing.T) {
	lines := &lineCounter{phrase: "another process"}
	db := openDB(t, newFileStore(t), func(o *Options) {
		o.ExternalPoll = 200 * time.Microsecond
		o.Logger = slog.New(lines)
	})
	write(t, db, "CREATE TABLE t(x)")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				write(t, db, "INSERT INTO t VALUES (?)", sqlconn.Value{Type: sqlconn.Integer, Int: int64(w*1000 + i)})
				if i%10 == 0 {
					time.Sleep(time.Millisecond) // let the poll run between groups
				}
			}
		}()
	}
	wg.Wait()
	if n := lines.n.Load(); n != 0 {
		t.Fatalf("%d log lines name another process; every commit came through the writer", n)
	}

	other, err := sqlconn.Open(db.path, sqlconn.OwnWriter, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = other.Run("INSERT INTO t VALUES ('from another process')")
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for lines.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if lines.n.Load() != 1 {
		t.Fatalf("%d log lines for one commit of another process, want 1", lines.n.Load())
	}
}
