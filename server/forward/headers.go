package forward

// The headers sluice's instances exchange; the bookmark header is
// dbhost.BookmarkHeader.
const (
	// HeaderForwardedBy marks a request one instance proxied to another
	// (its value: the sender's URL). Such a request is never forwarded
	// again: two instances that each believe the other writes must not loop.
	HeaderForwardedBy = "Sluice-Forwarded-By"
	// HeaderServedBy says which copy answered: ServedByReplica for the
	// follower of an instance that does not write the database, or for a
	// cold open's view before its lease settled (cold.go); absent when the
	// writer answered.
	HeaderServedBy  = "Sluice-Served-By"
	ServedByReplica = "replica"
)
