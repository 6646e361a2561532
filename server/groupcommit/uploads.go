package groupcommit

import (
	"sync"
	"time"
)

// UploadSlots bounds the write-path uploads in flight across every database
// of a server; every database's Committer shares one (Options.Uploads). A
// store that is busy answers slower the more requests it is given at once;
// with a bound, a database whose shipper waits for a slot
// keeps taking commits into its next upload instead of adding another small
// PUT to the queue. Slots are handed out in arrival order, and each
// database has one shipper, so a busy database cannot starve a quiet one:
// with every slot taken, databases upload in turn.
type UploadSlots struct {
	mu      sync.Mutex
	free    int
	waiters []chan struct{} // first in, first served
}

// NewUploadSlots returns a bound of n uploads in flight at once.
func NewUploadSlots(n int) *UploadSlots { return &UploadSlots{free: n} }

// acquire returns a channel that is closed once the caller holds a slot;
// the holder gives it back with release.
func (s *UploadSlots) acquire() <-chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && len(s.waiters) == 0 {
		s.free--
		close(ch)
		return ch
	}
	s.waiters = append(s.waiters, ch)
	return ch
}

// release returns a slot, to the longest waiter if there is one.
func (s *UploadSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) > 0 {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		close(w)
		return
	}
	s.free++
}

// waitSlot blocks until the database holds an upload slot, taking every
// group committed meanwhile into pending, and returns the slot's release.
func (c *Committer) waitSlot(pending []*group, open bool) (release func(), _ []*group, stillOpen bool) {
	slots := c.opts.Uploads
	if slots == nil {
		return func() {}, pending, open
	}
	granted := slots.acquire()
	for {
		var in chan *group // nil once closed: the select then only waits for the slot
		if open {
			in = c.shipCh
		}
		select {
		case <-granted:
			return slots.release, pending, open
		case g, ok := <-in:
			if !ok {
				open = false
				continue
			}
			pending = append(pending, g)
		}
	}
}

// waitWindow holds the upload until the commit window after the oldest
// pending commit has passed, taking every group committed meanwhile: with
// a window of D, writes committed within D of each other share one upload.
func (c *Committer) waitWindow(pending []*group, open bool) ([]*group, bool) {
	w := c.opts.CommitWindow
	if w <= 0 || !open || len(pending) == 0 {
		return pending, open
	}
	wait := time.Until(pending[0].committed.Add(w))
	if wait <= 0 {
		return pending, open
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for open {
		select {
		case <-t.C:
			return pending, open
		case g, ok := <-c.shipCh:
			if !ok {
				return pending, false // closing: ship now
			}
			pending = append(pending, g)
		}
	}
	return pending, open
}
