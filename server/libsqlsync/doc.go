// Package libsqlsync serves libSQL's embedded-replica sync protocol (the
// HTTP one libSQL's Rust core, and so Python's libsql, speaks to sqld):
// GET …/info names the current generation, GET …/export/{generation} sends
// a database file to bootstrap from, and GET …/sync/{generation}/{start}/{end}
// sends WAL frames (24-byte header + one 4096-byte page) that the client
// appends to its local WAL.
//
// sluice keeps no WAL for this. A generation is a TXID: a client that
// believes it is at generation g holds the database as of TXID g or later,
// never older. What it is sent is one transaction: every page changed after
// a TXID it is known to be at, at the newest shipped version, so applying
// them gives exactly the newest state (pages it already has are rewritten
// unchanged). Which TXID a client is at is remembered by History under the
// client's next request (generation, frames it holds), so a sync after N
// commits is one transaction of the changed pages and an empty sync one
// small request; the client steps to the next generation only when its
// local WAL is full. The pages come from History, the recently
// shipped LTX files of each database kept in memory; a client older than
// that window walks past the generations it cannot be given diffs for
// without receiving anything, and at the window's edge receives the whole
// database (a restore of the replica, shared by every client), so a replica
// that was offline for days still catches up without the server keeping
// every transaction.
package libsqlsync
