package replica_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

// overwritingStore behaves like an S3-compatible store that ignores
// If-None-Match: its create-if-absent replaces whatever is there.
type overwritingStore struct{ replica.Store }

func (s overwritingStore) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (replica.ObjectInfo, error) {
	return s.Store.Put(ctx, key, r, size)
}

// A store that cannot fence a second writer fails the probe permanently,
// and the probe's object is removed either way.
func TestProbeRefusesAStoreWithoutConditionalWrites(t *testing.T) {
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := replica.Probe(ctx, fs); err != nil {
		t.Fatalf("probe of a store with conditional creates: %v", err)
	}
	err = replica.Probe(ctx, overwritingStore{fs})
	if !errors.Is(err, replica.ErrNoConditionalWrites) || !replica.Permanent(err) {
		t.Fatalf("probe of a store ignoring If-None-Match: %v (permanent %v), want ErrNoConditionalWrites, permanent", err, replica.Permanent(err))
	}
	if left, err := fs.List(ctx, replica.ProbePrefix); err != nil || len(left) != 0 {
		t.Fatalf("probe objects left: %d (%v)", len(left), err)
	}
}
