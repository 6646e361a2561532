package groupcommit

import (
	"sync/atomic"
	"time"
)

// The gather window of pipelined uploads. Clients answered by one upload
// come back within a few milliseconds of each other, but not at once: a
// shipper that starts an upload for the first of them splits that wave into
// several small uploads. Acknowledgement is in TXID order, so each write
// then waits for the slowest upload of its wave, not for a median one
// (measured at 10 connections and a 25 ms PUT: 1.6 requests per upload,
// 4 uploads in flight, 11 ms on average held for an earlier upload on top
// of a 32 ms upload of its own). So while an earlier upload is still in
// flight, the next one starts only a fraction of an upload's time after its
// oldest commit, taking the commits made meanwhile. With nothing in flight
// (one client, or the first write after a pause) it starts at once: the
// window never delays a write that could have been answered sooner.

// gatherFraction is the part of the recent upload time the window lasts:
// long enough to take a wave, short beside the upload it joins.
const gatherFraction = 8

// maxGather bounds the adaptive window, whatever the store's latency.
const maxGather = 10 * time.Millisecond

// uploadTime is a moving average of the pipelined uploads' time from start
// to acknowledgement (ns), which sets the adaptive window.
type uploadTime struct{ avg atomic.Int64 }

func (u *uploadTime) observe(d time.Duration) {
	old := u.avg.Load()
	if old == 0 {
		u.avg.Store(int64(d))
		return
	}
	u.avg.Store(old + (int64(d)-old)/16)
}

// gatherWindow is how long the next upload waits after its oldest commit
// while another is in flight (Options.PipelineGather; 0: adaptive).
func (c *Committer) gatherWindow() time.Duration {
	switch w := c.opts.PipelineGather; {
	case w < 0:
		return 0
	case w > 0:
		return w
	}
	return min(time.Duration(c.pipe.upload.avg.Load())/gatherFraction, maxGather)
}

// waitGather holds the next pipelined upload for the gather window while an
// earlier upload is in flight, taking every group committed meanwhile.
func (c *Committer) waitGather(pending []*group, open bool) ([]*group, bool) {
	if c.pipe == nil || !open || len(pending) == 0 || len(c.pipe.room) == 0 {
		return pending, open
	}
	wait := time.Until(pending[0].committed.Add(c.gatherWindow()))
	if wait <= 0 {
		return pending, open
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
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
}
