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

// Adopt gives name's copy to this instance's writer, which took the lease:
// it stops following and its file becomes dst (follow.Follower.CloseInto).
// txid, if not 0, is where the previous holder released the lease with
// everything shipped: the copy must have applied exactly that TXID (it
// waits up to adoptWait for it). It returns the TXID the copy is at and
// the level-0 files it was built from, each read and checked
// (follow.Follower.Verified). false: no such copy, or not at txid; nothing
// was moved and the writer restores from the bucket.
func (s *Set) Adopt(ctx context.Context, name, dst string, txid uint64) (files []replica.LTXFile, at uint64, ok bool) {
	s.mu.Lock()
	fd := s.m[name]
	s.mu.Unlock()
	if fd == nil {
		return nil, 0, false
	}
	if txid != 0 {
		wctx, cancel := context.WithTimeout(ctx, adoptWait)
		err := fd.f.WaitFor(wctx, ltx.TXID(txid))
		cancel()
		if err != nil || fd.f.Pos().TXID != ltx.TXID(txid) {
			return nil, 0, false
		}
	}
	s.mu.Lock()
	if s.m[name] != fd {
		s.mu.Unlock()
		return nil, 0, false
	}
	delete(s.m, name)
	s.mu.Unlock()
	moved := fd.closeInto(dst)
	verified, at := fd.f.Verified(), uint64(fd.f.Pos().TXID)
	if moved != nil {
		s.opts.Logger.Warn("could not hand the follower's copy to the writer; restoring from the bucket", "db", name, "err", moved)
	}
	for _, suffix := range []string{"", "-journal"} {
		_ = os.Remove(s.path(name) + suffix)
	}
	if moved != nil {
		return nil, 0, false
	}
	return verified, at, true
}
