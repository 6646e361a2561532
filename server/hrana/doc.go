// Package hrana serves libSQL's Hrana protocol over HTTP (v1 execute/batch,
// v2 and v3 pipelines, the v3 cursor) so that the stock libSQL clients
// (@libsql/client, libsql-client-go, libsql-client for Python) work unmodified
// against sluice.
//
// A Hrana stream is a logical connection. Outside a transaction its statements
// run on dbhost's read pool (read-only statements) or in dbhost's group commit
// (everything else); a stream that opens a transaction holds a dbhost.Session
// until it is back in autocommit. Stream state lives server side, keyed by a
// signed, single-use baton.
//
// It imports server/dbhost (the contract) and the standard library only; the
// server's router selects the database and hands it over with WithDatabase,
// or, for a read answered by a read replica, to ServeRead (readcheck.go).
package hrana
