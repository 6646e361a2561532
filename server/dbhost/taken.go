package dbhost

import "context"

// openTaken opens name once this instance took its lease in the background
// (the holder handed it over or its lease expired): the instance waited
// for that lease to write, so the database is restored whole and opened at
// once, without a cold open. A cold open would first read the page index
// of every file of the newest state (one request each: after a crash, one
// per transaction the previous holder left unmerged) for a view the next
// write cannot use, then wait for a read or hydrateDelay before restoring;
// both were on the hand-over's gap. Meanwhile requests for name wait for
// the open under its lock, as for any database opened from the bucket.
func (h *Host) openTaken(ctx context.Context, name string) (Database, error) {
	if db, err := h.cached(name); db != nil || err != nil {
		return db, err
	}
	if c := h.coldFor(name); c != nil { // a cold open already under way holds the lease
		return c, nil
	}
	unlock := h.lock(name)
	defer unlock()
	if db, err := h.cached(name); db != nil || err != nil { // opened while we waited for the lock
		return db, err
	}
	if c := h.coldFor(name); c != nil {
		return c, nil
	}
	return h.open(ctx, name, name == DefaultDatabase, false)
}
