package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
)

// hangingStore makes its next hang conditional creates stall until the
// caller gives up, as a saturated or hung connection does. With land set,
// each stalled request has already stored the object: only the answer is
// lost.
type hangingStore struct {
	replica.Store
	mu       sync.Mutex
	hang     int
	land     bool
	attempts []string
}

func (s *hangingStore) PutIfAbsent(ctx context.Context, k string, r io.Reader, n int64) (replica.ObjectInfo, error) {
	s.mu.Lock()
	s.attempts = append(s.attempts, k)
	hang := s.hang > 0
	if hang {
		s.hang--
	}
	s.mu.Unlock()
	if !hang {
		return s.Store.PutIfAbsent(ctx, k, r, n)
	}
	if s.land {
		if _, err := s.Store.PutIfAbsent(context.Background(), k, r, n); err != nil {
			return replica.ObjectInfo{}, err
		}
	} else if _, err := io.Copy(io.Discard, r); err != nil {
		return replica.ObjectInfo{}, err
	}
	<-ctx.Done()
	return replica.ObjectInfo{}, fmt.Errorf("put %s: %w", k, ctx.Err())
}

func TestStalledUploadIsRetriedWithoutForking(t *testing.T) {
	for _, land := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", land), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.db")
			a := newApp(t, path)
			store := &hangingStore{Store: newStore(t), land: land}
			db := openDB(t, path, store, Options{UploadStall: 100 * time.Millisecond})
			start := db.Pos()

			store.mu.Lock()
			store.hang, store.attempts = 1, nil
			store.mu.Unlock()
			a.insert(2)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pos, err := db.Sync(ctx)
			if err != nil {
				t.Fatalf("Sync after one stalled attempt: %v", err)
			}
			if pos.TXID != start.TXID+1 {
				t.Fatalf("shipped TXID %s, want %s", pos.TXID, start.TXID+1)
			}
			store.mu.Lock()
			attempts := append([]string(nil), store.attempts...)
			store.mu.Unlock()
			want := replica.LTXKey(0, start.TXID+1, start.TXID+1)
			if len(attempts) != 2 || attempts[0] != want || attempts[1] != want {
				t.Fatalf("attempts %v; want two of %s", attempts, want)
			}
			assertReplicaEquals(t, store, path)
		})
	}
}

// Every attempt stalls: Sync reports the stall (never success), the file
// stays pending, and the next Sync ships it.
func TestUploadThatKeepsStallingFailsThenRecovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	a := newApp(t, path)
	store := &hangingStore{Store: newStore(t)}
	db := openDB(t, path, store, Options{UploadStall: 50 * time.Millisecond})
	start := db.Pos()
	store.mu.Lock()
	store.hang = uploadAttempts
	store.mu.Unlock()
	a.insert(1)
	if _, err := db.Sync(context.Background()); !errors.Is(err, replica.ErrStalled) {
		t.Fatalf("Sync with every attempt stalled: %v; want ErrStalled", err)
	}
	if db.Pos() != start {
		t.Fatalf("position moved to %s though nothing was accepted", db.Pos())
	}
	if pos := sync1(t, db); pos.TXID != start.TXID+1 {
		t.Fatalf("recovered at TXID %s, want %s", pos.TXID, start.TXID+1)
	}
	assertReplicaEquals(t, store, path)
}
