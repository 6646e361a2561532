package dbhost

// leaseTaken reports whether this instance holds name's lease while the
// database is not open: it took the lease to write (in the background,
// after the holder handed it over or its lease expired, or it keeps it
// across a reopen). Such a database is restored whole and opened at once,
// not cold-opened: a cold open first reads the page index of every file of
// the newest state (one request each: after a crash, one per transaction
// the previous holder left unmerged) for a view the next write cannot use,
// then waits for a read or hydrateDelay before restoring, and both were on
// the hand-over's gap. Requests meanwhile wait for the open under name's
// lock, as for any database restored before its first answer.
func (h *Host) leaseTaken(name string) bool {
	return h.leases != nil && h.leases.Lease(name) != nil
}
