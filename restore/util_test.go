package restore

import (
	"context"
	"io"
	"testing"

	"github.com/sluicedb/sluice/replica"
)

type ioReader = io.Reader

func toReaders(rs []ioReader) []io.Reader { return rs }

func readObject(t testing.TB, s replica.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
