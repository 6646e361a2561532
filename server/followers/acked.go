package followers

import (
	"context"

	"github.com/sluicedb/sluice/server/dbhost"
)

// Writes forwarded through this instance: the writer's answer names the
// TXID that holds the write (its bookmark). A client that wrote through
// this instance and then syncs its embedded replica from it must find its
// write, so such a sync waits for the copy to apply that TXID first.

// Acknowledged records that the writer acknowledged TXID txid of name to a
// request this instance forwarded. Only a running copy records it: one
// started later restores at least that TXID.
func (s *Set) Acknowledged(name string, txid uint64) {
	s.mu.Lock()
	fd := s.m[name]
	s.mu.Unlock()
	if fd == nil {
		return
	}
	for {
		old := fd.acked.Load()
		if txid <= old || fd.acked.CompareAndSwap(old, txid) {
			return
		}
	}
}

// Caught returns a view of name's copy once it has applied every write the
// writer acknowledged through this instance (a retryable LAGGING error if
// it does not within Options.BookmarkWait).
func (s *Set) Caught(ctx context.Context, name string) (*View, error) {
	v, err := s.View(ctx, name, 0)
	if err != nil {
		return nil, err
	}
	if acked := v.fd.acked.Load(); acked > uint64(v.Bookmark()) {
		if err := v.fd.waitFor(ctx, dbhost.Bookmark(acked), s.opts.BookmarkWait); err != nil {
			return nil, err
		}
	}
	return v, nil
}
