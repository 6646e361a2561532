// Package hrana serves libSQL's Hrana protocol over HTTP (v1 execute/batch,
// v2 and v3 pipelines, the v3 cursor, JSON and protobuf) so that the stock
// libSQL clients (@libsql/client, libsql-client-go, libsql-client for
// Python) work unmodified against sluice, and hands WebSocket upgrades to
// server/hrana/ws.
//
// Streams and the execution of requests are server/hrana/stream's; the
// messages and their encodings are server/hrana/proto's. This package reads
// requests, picks HTTP statuses and writes answers. Stream state lives
// server side, keyed by a signed, single-use baton.
//
// The server's router selects the database and hands it over with
// WithDatabase, or, for a read answered by a read replica, to ServeRead
// (readcheck.go).
package hrana
