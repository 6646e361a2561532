// Package proto holds Hrana's messages as Go types, shared by every
// transport and encoding, and their JSON encoding (Hrana 1-3 over HTTP and
// WebSocket), with rows encoded by hand as SQLite steps them (RowsEncoder).
// server/hrana/hranapb encodes the same types in protobuf.
//
// It is pure encoding: no handler, no database, no transport.
package proto
