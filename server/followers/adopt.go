package followers

import (
	"context"
	"os"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

// adoptWait bounds how long Adopt waits for a copy to apply the TXID the
// writer released the lease at: the writer pushed it before releasing, so
// the copy is fetching it already; a restore from the bucket is the
// alternative, which costs more than this.
const adoptWait = 500 * time.Millisecond

// Adopt gives name's copy to this instance's writer, which took the lease
// from a holder that released it at txid with everything shipped: once the
// copy has applied exactly txid, it stops following and its file becomes
// dst (follow.Follower.CloseInto). It returns the level-0 files the copy
// was built from, each read and checked (follow.Follower.Verified). false:
// no such copy, or it is not at txid; nothing was moved and the writer
// restores from the bucket.
func (s *Set) Adopt(ctx context.Context, name, dst string, txid uint64) ([]replica.LTXFile, bool) {
	s.mu.Lock()
	fd := s.m[name]
	s.mu.Unlock()
	if fd == nil {
		return nil, false
	}
	wctx, cancel := context.WithTimeout(ctx, adoptWait)
	err := fd.f.WaitFor(wctx, ltx.TXID(txid))
	cancel()
	if err != nil || fd.f.Pos().TXID != ltx.TXID(txid) {
		return nil, false
	}
	s.mu.Lock()
	if s.m[name] != fd {
		s.mu.Unlock()
		return nil, false
	}
	delete(s.m, name)
	s.mu.Unlock()
	moved := fd.closeInto(dst)
	verified := fd.f.Verified()
	if moved != nil {
		s.opts.Logger.Warn("could not hand the follower's copy to the writer; restoring from the bucket", "db", name, "err", moved)
	}
	for _, suffix := range []string{"", "-journal"} {
		_ = os.Remove(s.path(name) + suffix)
	}
	if moved != nil {
		return nil, false
	}
	return verified, true
}
