package replica_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/replica/file"
)

var errNoSuchBucket = errors.New("no such bucket")

type unlistable struct{ replica.Store }

func (unlistable) List(context.Context, string) ([]replica.ObjectInfo, error) {
	return nil, errNoSuchBucket
}

// A store that cannot be listed (a wrong bucket, no credentials) fails every
// level the same way: the error says so once, not ten times, and still
// matches the cause.
func TestListAllLTXReportsOneFailureOnce(t *testing.T) {
	fs, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = replica.ListAllLTX(context.Background(), unlistable{fs})
	if !errors.Is(err, errNoSuchBucket) {
		t.Fatalf("error %v does not match its cause", err)
	}
	if n := strings.Count(err.Error(), errNoSuchBucket.Error()); n != 1 {
		t.Fatalf("the cause appears %d times in %q", n, err)
	}
	if !strings.Contains(err.Error(), "10 of 10 levels") {
		t.Fatalf("error %q does not say how many levels failed", err)
	}
	if _, err := replica.ListAllLTX(context.Background(), fs); err != nil {
		t.Fatalf("an empty, listable store: %v", err)
	}
}
