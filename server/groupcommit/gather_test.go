package groupcommit

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// gateStore holds every level-0 upload while its gate is shut and counts
// the level-0 uploads and those held.
type gateStore struct {
	replica.Store
	mu         sync.Mutex
	gate       chan struct{} // nil: open
	puts, held atomic.Int64
}

func (s *gateStore) shut() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *gateStore) open() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func (s *gateStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	if strings.Contains(k, "ltx/0/") {
		s.puts.Add(1)
		s.mu.Lock()
		g := s.gate
		s.mu.Unlock()
		if g != nil {
			s.held.Add(1)
			<-g
			s.held.Add(-1)
		}
	}
	return s.Store.PutIfAbsent(ctx, k, r, n)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A write made while an earlier upload is in flight waits for the gather
// window, or until nothing is in flight, and shares its upload with the
// writes committed meanwhile; a write made with nothing in flight starts
// its upload at once, however long the window. Every acknowledged write is
// restored. With the window off, the
// same writes take an upload each (the contrast the test could fail on).
func TestPipelinedUploadGathersWritesWhileAnotherIsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gather     time.Duration
		wantUpload int64 // level-0 uploads for the writes made behind the held one
	}{
		{"window", 2 * time.Second, 1},
		{"off", -1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := newFileStore(t)
			store := &gateStore{Store: base}
			db := openPipelinedDBWith(t, store, 8, func(o *Options) { o.PipelineGather = tc.gather })
			write(t, db, "CREATE TABLE t(id INTEGER PRIMARY KEY)")

			// Nothing in flight: no wait for the window.
			start := time.Now()
			write(t, db, "INSERT INTO t VALUES (1)")
			if d := time.Since(start); tc.gather > 0 && d >= tc.gather {
				t.Fatalf("a write with nothing in flight took %s: it waited for the %s window", d, tc.gather)
			}

			// Hold one upload in flight, then write twice behind it.
			store.shut()
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			insert := func(id int) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := db.Submit(context.Background(), func(c sqlconn.Conn) error {
						_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: fmt.Sprintf("INSERT INTO t VALUES (%d)", id)})
						return err
					})
					errs <- err
				}()
			}
			insert(2)
			waitFor(t, "the first upload to be held", func() bool { return store.held.Load() == 1 })
			before := store.puts.Load()
			insert(3)
			time.Sleep(50 * time.Millisecond) // the next write comes a little later, as a client's would
			insert(4)
			if tc.gather < 0 {
				waitFor(t, "both later uploads to start", func() bool { return store.puts.Load()-before == 2 })
			} else {
				time.Sleep(100 * time.Millisecond)
				if n := store.puts.Load() - before; n != 0 {
					t.Fatalf("%d uploads started within the window", n)
				}
			}
			opened := time.Now()
			store.open()
			wg.Wait()
			if d := time.Since(opened); tc.gather > 0 && d >= tc.gather {
				t.Fatalf("the writes were answered %s after the held upload landed: they waited out the %s window", d, tc.gather)
			}
			close(errs)
			acked := 0
			for err := range errs {
				if err != nil {
					t.Fatalf("write: %v", err)
				}
				acked++
			}
			later := store.puts.Load() - before
			restored := restoredCount(t, base, "SELECT count(*) FROM t")
			t.Logf("window %s: %d uploads for the 2 writes behind the held one; %d+1 acknowledged, %d restored", tc.gather, later, acked, restored)
			if later != tc.wantUpload {
				t.Fatalf("%d uploads for the 2 writes behind the held one, want %d", later, tc.wantUpload)
			}
			if restored != int64(acked)+1 {
				t.Fatalf("restored %d rows, %d acknowledged", restored, acked+1)
			}
		})
	}
}
