package dbhost

import "context"

type readAfterKey struct{}

// WithReadAfter marks ctx's reads as needing a state at least as new as
// bm (the request's Sluice-Bookmark: read-your-writes). A database that
// always shows its newest state ignores it; one that may show an older
// state (a cold open answering before its lease was taken) waits until it
// shows bm or newer.
func WithReadAfter(ctx context.Context, bm Bookmark) context.Context {
	if bm == 0 {
		return ctx
	}
	return context.WithValue(ctx, readAfterKey{}, bm)
}

// ReadAfter is the bookmark WithReadAfter put in ctx (0: none).
func ReadAfter(ctx context.Context) Bookmark {
	bm, _ := ctx.Value(readAfterKey{}).(Bookmark)
	return bm
}
