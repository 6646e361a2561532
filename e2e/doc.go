// Package e2e holds end-to-end tests that drive the built sluice binary against
// real stores (a MinIO server, local directories), real SQLite writers in other
// processes, the real Litestream 0.5.17 for interoperability, and the stock
// libSQL clients and ORMs, whose results on sluice serve must match the same
// client's on a local file.
//
// Besides internal/testenv it imports only clients (libsql-client-go, modernc's
// SQLite); everything of sluice goes through the binary.
package e2e
