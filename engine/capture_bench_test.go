package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
)

// BenchmarkCaptureAndShip is the hot path of the sidecar and the server: one
// small transaction committed, then one Sync that captures it from the WAL,
// encodes it and ships it to a local-directory replica.
func BenchmarkCaptureAndShip(b *testing.B) {
	path := filepath.Join(b.TempDir(), "app.db")
	a := newApp(b, path)
	a.insert(10)
	store := newStore(b)
	ctx := context.Background()
	db, err := Open(ctx, path, store, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	must(b, err)
	b.Cleanup(func() { db.Close(ctx) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.insert(20)
		if _, err := db.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
