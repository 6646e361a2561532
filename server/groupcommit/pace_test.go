package groupcommit

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/server/sqlconn"
)

// gatedStore holds LTX uploads while closed.
type gatedStore struct {
	replica.Store
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	entered chan struct{} // receives one token per held upload
}

func (s *gatedStore) close() {
	s.mu.Lock()
	s.gate, s.entered = make(chan struct{}), make(chan struct{}, 16)
	s.mu.Unlock()
}

func (s *gatedStore) open() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func (s *gatedStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	s.mu.Lock()
	gate, entered := s.gate, s.entered
	s.mu.Unlock()
	if gate != nil && strings.Contains(key, "ltx/") {
		entered <- struct{}{}
		<-gate
	}
	return s.Store.PutIfAbsent(ctx, key, r, size)
}

// In sync mode a commit made while an upload runs cannot ship before that
// upload ends, so a few writes arriving meanwhile wait and commit as one
// group instead of one group each; all are acknowledged once shipped.
func TestWritesArrivingDuringAnUploadFormOneGroup(t *testing.T) {
	base := newFileStore(t)
	store := &gatedStore{Store: base}
	rec := &groupRecorder{}
	db := openDB(t, store, func(o *Options) { o.Observer = rec })
	write(t, db, "CREATE TABLE t(x)")
	groups := func() []int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return append([]int(nil), rec.sizes...)
	}
	before := len(groups())

	store.close()
	var wg sync.WaitGroup
	errs := make([]error, 11)
	send := func(i int) {
		defer wg.Done()
		_, errs[i] = db.Submit(context.Background(), func(c sqlconn.Conn) error {
			_, err := c.Exec(context.Background(), sqlconn.Stmt{SQL: "INSERT INTO t VALUES (?)", Args: []sqlconn.Value{{Type: sqlconn.Integer, Int: 1}}})
			return err
		})
	}
	wg.Add(1)
	go send(0)
	select { // the first write's upload is now held
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first write's upload never started")
	}
	for i := 1; i < len(errs); i++ {
		wg.Add(1)
		go send(i)
	}
	time.Sleep(300 * time.Millisecond)
	if g := groups(); len(g) != before+1 {
		t.Fatalf("groups committed while the upload was held: %v, want only the first write's", g[before:])
	}
	store.open()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if g := groups()[before:]; len(g) != 2 || g[0] != 1 || g[1] != 10 {
		t.Fatalf("group sizes %v, want [1 10]: the ten writes that waited for the upload commit together", g)
	}
	if got := restoredCount(t, base, "SELECT count(*) FROM t"); got != 11 {
		t.Fatalf("bucket holds %d rows, want the 11 acknowledged", got)
	}
}
