// Package e2e holds end-to-end tests that drive the built sluice binary against
// real stores (a MinIO server, local directories), real SQLite writers in other
// processes, and the real Litestream 0.5.17 for interoperability.
//
// It imports internal/testenv only; everything else goes through the binary.
package e2e
