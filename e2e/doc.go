// Package e2e holds end-to-end tests that drive the built sluice binary against
// real stores (a MinIO server, local directories), real SQLite writers in other
// processes, the real Litestream 0.5.17 for interoperability, and the stock
// libSQL clients and ORMs, whose results on sluice serve must match the same
// client's on a local file.
//
// Besides internal/testenv it imports only clients (libsql-client-go, modernc's
// SQLite); everything of sluice goes through the binary.
//
// Tests that mostly wait (on servers, timers, other processes) and judge no
// latency call t.Parallel and run beside each other; tests that judge a
// latency, a canary's p99 or a hand-over gap run alone. `make test` runs
// the hostile-neighbour tests (TestHostile*) and the hand-over gaps
// (TestHandoffGap*) last, with nothing beside them (the Makefile's unit).
package e2e
