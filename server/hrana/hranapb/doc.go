// Package hranapb is Hrana 3's protobuf encoding (libSQL's
// https://github.com/tursodatabase/libsql/blob/main/docs/HRANA_3_SPEC.md), written
// by hand over protowire: the messages are few and small, and decoding
// straight into server/hrana/proto's types keeps one request executor for
// both encodings. It covers the HTTP pipeline and cursor bodies and the
// WebSocket client and server messages.
package hranapb
