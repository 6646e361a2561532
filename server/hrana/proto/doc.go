// Package proto holds Hrana's messages as Go types and their encodings: the
// JSON of Hrana 1-3 over HTTP and WebSocket (rows encoded by hand as SQLite
// steps them, RowsEncoder), and Hrana 3's protobuf encoding, decoded into and
// encoded from the same types so one executor serves both.
//
// It is pure encoding: no handler, no database, no transport.
package proto
