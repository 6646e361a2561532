package dbhost

import (
	"context"
	"strings"
	"sync"
	"time"
)

// bucketListTTL bounds how stale the list of databases found only in the
// bucket may be: listing the whole replica root is the one LIST a listing
// costs, so repeated listings within it share one.
const bucketListTTL = 10 * time.Second

// bucketNames caches the names of the databases the replica root holds.
type bucketNames struct {
	mu    sync.Mutex
	at    time.Time
	names map[string]bool
}

// replicaNames returns the names of databases with transaction files in
// the replica (<name>/ltx/...), listed at most once per bucketListTTL.
func (h *Host) replicaNames(ctx context.Context) (map[string]bool, error) {
	b := &h.bucket
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.names != nil && time.Since(b.at) < bucketListTTL {
		return b.names, nil
	}
	objs, err := h.opts.Store.List(ctx, "")
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, o := range objs {
		name, rest, ok := strings.Cut(o.Key, "/")
		if ok && strings.HasPrefix(rest, "ltx/") && validName(name) {
			names[name] = true
		}
	}
	b.names, b.at = names, time.Now()
	return names, nil
}

// forgetReplicaNames drops the cache after a purge, so a listing does not
// show the purged database as still in the bucket.
func (h *Host) forgetReplicaNames() {
	h.bucket.mu.Lock()
	h.bucket.names = nil
	h.bucket.mu.Unlock()
}
