package compact

import (
	"context"
	"sync"
)

// Deleter removes the objects retention no longer needs, in the background:
// on a busy store a DELETE of a thousand level-0 files takes seconds, and
// while compaction workers waited for it the level-0 backlog of every other
// database grew. A compactor forgets the files at once (they are covered
// by a higher level, or past every retention window, so no merge or
// restore chain needs them); if a delete fails, its keys go back to their
// compactor and the next retention pass tries again. The queue is bounded:
// when it is full, the pass deletes itself, so a store that cannot keep up
// slows compaction rather than letting memory grow.
type Deleter struct {
	jobs  chan deleteJob
	start sync.Once
	n     int
}

type deleteJob struct {
	c    *Compactor
	keys []string
}

// DefaultDeleter is the process's deleter (a server's compactors share it).
var DefaultDeleter = NewDeleter(2, 256)

// NewDeleter returns a deleter with workers goroutines (started on first
// use) and room for queued batches of keys.
func NewDeleter(workers, queued int) *Deleter {
	return &Deleter{jobs: make(chan deleteJob, queued), n: workers}
}

// enqueue hands keys to the deleter; false when its queue is full.
func (d *Deleter) enqueue(c *Compactor, keys []string) bool {
	d.start.Do(func() {
		for range d.n {
			go d.work()
		}
	})
	select {
	case d.jobs <- deleteJob{c, keys}:
		return true
	default:
		return false
	}
}

func (d *Deleter) work() {
	for j := range d.jobs {
		j.c.deleteNow(j.keys)
	}
}

// deleteNow deletes keys with the compactor's store and budget; keys that
// could not be deleted are kept for the next retention pass.
func (c *Compactor) deleteNow(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*c.cfg.CallTimeout)
	defer cancel()
	if err := c.call(ctx, func(ctx context.Context) error { return c.store.Delete(ctx, keys...) }); err != nil {
		c.log.Warn("deleting files retention no longer needs failed; the next pass retries", "count", len(keys), "err", err)
		c.mu.Lock()
		c.undeleted = append(c.undeleted, keys...)
		c.mu.Unlock()
		return
	}
	c.log.Debug("retention deleted files", "count", len(keys))
}
