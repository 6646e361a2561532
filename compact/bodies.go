package compact

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// BodyCache keeps the bytes of small level-0 files this process just
// uploaded, so the level-1 merge reads them from memory instead of getting
// them back from the store. Under sustained small writes every commit is a
// PUT, then a GET for the merge, then a DELETE for retention; the GET was a
// third of the store's work and, on a busy store, what made compaction fall
// behind the writes.
//
// The bytes are exactly what the store accepted (keys are never
// overwritten) and the merge checks every file's checksums as it reads them,
// so a cached body is as good as the object. A file the merge takes is
// removed. The cache is bounded in bytes: when full it keeps what it holds
// (the oldest files, which the next merge needs first) and refuses new
// ones, after dropping what waited longer than maxAge (a file another
// process compacted, a database closed).
type BodyCache struct {
	max    int64
	maxAge time.Duration

	mu    sync.Mutex
	used  int64
	order *list.List // of *cached, oldest first
	items map[bodyKey]*list.Element

	hits, misses atomic.Int64
}

type bodyKey struct {
	owner *Compactor
	key   string
}

type cached struct {
	k    bodyKey
	body []byte
	at   time.Time
}

// MaxCachedBody is the largest file a BodyCache keeps: bigger files are
// rare (bursts, snapshots) and cost one GET each among many pages.
const MaxCachedBody = 64 << 10

// DefaultBodyCacheBytes bounds DefaultBodies.
const DefaultBodyCacheBytes = 16 << 20

// DefaultBodies is the process's cache, used by every compactor whose
// Config names none.
var DefaultBodies = NewBodyCache(DefaultBodyCacheBytes, 10*time.Minute)

// NewBodyCache returns a cache of at most max bytes whose entries may be
// dropped after maxAge.
func NewBodyCache(max int64, maxAge time.Duration) *BodyCache {
	return &BodyCache{max: max, maxAge: maxAge, order: list.New(), items: map[bodyKey]*list.Element{}}
}

// put keeps a copy of body for owner's file key, if it fits.
func (b *BodyCache) put(owner *Compactor, key string, body []byte, now time.Time) {
	n := int64(len(body))
	if b == nil || n == 0 || n > MaxCachedBody {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := bodyKey{owner, key}
	if _, ok := b.items[k]; ok {
		return
	}
	for b.used+n > b.max {
		front := b.order.Front()
		if front == nil || now.Sub(front.Value.(*cached).at) < b.maxAge {
			return // full of files still waiting for their merge
		}
		b.remove(front)
	}
	b.items[k] = b.order.PushBack(&cached{k: k, body: append([]byte(nil), body...), at: now})
	b.used += n
}

// has reports whether owner's file key is kept.
func (b *BodyCache) has(owner *Compactor, key string) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.items[bodyKey{owner, key}]
	return ok
}

// take returns and forgets owner's file key.
func (b *BodyCache) take(owner *Compactor, key string) ([]byte, bool) {
	if b == nil {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.items[bodyKey{owner, key}]
	if !ok {
		b.misses.Add(1)
		return nil, false
	}
	b.hits.Add(1)
	body := e.Value.(*cached).body
	b.remove(e)
	return body, true
}

// forget drops every file of owner (a compactor that stopped).
func (b *BodyCache) forget(owner *Compactor) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for e := b.order.Front(); e != nil; {
		next := e.Next()
		if e.Value.(*cached).k.owner == owner {
			b.remove(e)
		}
		e = next
	}
}

func (b *BodyCache) remove(e *list.Element) {
	c := b.order.Remove(e).(*cached)
	delete(b.items, c.k)
	b.used -= int64(len(c.body))
}

// BodyCacheStats is what a BodyCache holds and how often merges found
// their inputs in it.
type BodyCacheStats struct {
	Files        int
	Bytes        int64
	Hits, Misses int64
}

// Stats reports the cache's contents and its hits and misses so far.
func (b *BodyCache) Stats() BodyCacheStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BodyCacheStats{Files: len(b.items), Bytes: b.used, Hits: b.hits.Load(), Misses: b.misses.Load()}
}
