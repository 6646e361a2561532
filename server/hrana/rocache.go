package hrana

import "sync"

// readOnlyCache remembers whether a SQL text is read-only, so that repeated
// statements go straight to the read pool or the writer without describing
// them first. Read-only-ness is a property of the text alone.
type readOnlyCache struct {
	mu sync.Mutex
	m  map[string]bool
}

const readOnlyCacheSize = 4096

func (c *readOnlyCache) get(sql string) (readOnly, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	readOnly, known = c.m[sql]
	return readOnly, known
}

func (c *readOnlyCache) put(sql string, readOnly bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= readOnlyCacheSize {
		c.m = make(map[string]bool, 64) // crude bound: start over rather than track recency
	}
	c.m[sql] = readOnly
}
