package timetravel

import (
	"context"
	"time"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
	"github.com/sluicedb/sluice/restore"
)

// A read at a TXID nobody asked for lately costs, before its first page,
// the LIST that resolves the point and the page indexes' reads: the plan
// made while resolving is kept for the build that follows (its on-demand
// view), which so does not list again; and the reads that come while that
// build runs do not resolve the point again (the listing is fresh).

// resolveListed is resolve; a TXID point also yields its plan (from the
// same LIST; the zero Listed otherwise).
func resolveListed(ctx context.Context, root replica.Store, name string, p Point) (txid, newest ltx.TXID, listed restore.Listed, err error) {
	if p.TXID == 0 {
		txid, newest, err = resolve(ctx, root, name, p)
		return txid, newest, restore.Listed{}, err
	}
	span, listed, err := restore.ResolveTXID(ctx, replica.Sub(root, name), p.TXID)
	if err != nil {
		return 0, 0, restore.Listed{}, resolveError(ctx, name, p, err)
	}
	return p.TXID, span.Newest, listed, nil
}

// keepPlan keeps l for k's build, if one is still to start.
func (c *Cache) keepPlan(k key, l restore.Listed) {
	if l.TXID() != k.txid {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[k] == nil {
		c.planned[k] = l
	}
}

// takePlan hands k's kept plan to its build, once.
func (c *Cache) takePlan(k key) (restore.Listed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.planned[k]
	delete(c.planned, k)
	return l, ok
}

// usable reports whether k can be served without resolving its point
// again: built and still of the database's history (current), or being
// built from a point resolved within Revalidate.
func (c *Cache) usable(ctx context.Context, k key) bool {
	c.mu.Lock()
	e := c.entries[k]
	building := e != nil && !isDone(e) && time.Since(e.started) < c.opts.Revalidate
	c.mu.Unlock()
	return building || (c.built(k) && c.current(ctx, k))
}

// restoreDelay: a state read on demand is restored once its first read was
// answered, or after this long, whichever comes first, so that the
// restore's downloads do not take the CPU and bandwidth that answer needs.
const restoreDelay = 250 * time.Millisecond

// waitFirstAnswer waits, if e is read on demand, for its first answer, at
// most restoreDelay in all.
func waitFirstAnswer(e *entry) {
	t := time.NewTimer(restoreDelay)
	defer t.Stop()
	select {
	case <-e.coldUp:
		if e.cold == nil {
			return
		}
	case <-t.C:
		return
	}
	select {
	case <-e.answered:
	case <-t.C:
	}
}
