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
// oldest request's arrival, taking the requests arriving meanwhile into one
// group, or as soon as nothing is in flight any more: a write may start
// its upload up to a sixteenth of an upload later, and its wave waits for one
// upload instead of the slowest of several. With nothing in flight (one
// client, or the first write after a pause) it starts at once.

// gatherFraction is the part of the recent upload time the window lasts:
// long enough to take a wave, short beside the upload it joins. A sixteenth
// (about 2 ms at a 25 ms PUT) took waves as large as an eighth did, in as
// many uploads, and answered sooner: 8 runs of each, interleaved, at 50
// connections, 1,214 writes/s against 1,168 (medians).
const gatherFraction = 16

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

// gatherWindow is how long, while another upload is in flight, the next
// group waits after its first request arrived (Options.PipelineGather; 0: adaptive).
func (c *Committer) gatherWindow() time.Duration {
	switch w := c.opts.PipelineGather; {
	case w < 0:
		return 0
	case w > 0:
		return w
	}
	return min(time.Duration(c.pipe.upload.avg.Load())/gatherFraction, maxGather)
}

// gatherWhileInFlight holds a sync group that is about to run while an
// earlier upload is in flight: it takes the requests arriving within the
// gather window of the first one's arrival, until the group is full or
// nothing is in flight any more. The group then commits once and ships as
// one upload: one commit per wave also keeps the WAL, and so the
// checkpoints that empty the pipeline, from growing with every request.
// open is false once the queue is closed.
func (c *Committer) gatherWhileInFlight(reqs []*writeReq, most int) (_ []*writeReq, open bool) {
	if c.pipe == nil || len(c.pipe.room) == 0 || len(reqs) >= most {
		return reqs, true
	}
	wait := time.Until(reqs[0].queued.Add(c.gatherWindow()))
	if wait <= 0 {
		return reqs, true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return reqs, true
		case <-c.pipe.freed:
			if len(c.pipe.room) == 0 {
				return reqs, true
			}
		case r, ok := <-c.writeCh:
			if !ok {
				return reqs, false
			}
			if reqs = append(reqs, r); len(reqs) >= most {
				return reqs, true
			}
		}
	}
}
