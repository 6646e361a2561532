// Package embedded measures libSQL embedded replicas against sluice serve:
// N application processes (real @libsql/client, worker.js) each keep a
// local replica of one database and read it while a writer inserts through
// the server. It reports local read latency beside the same reads over
// Hrana from the same clients, the lag from a write's acknowledgement to
// its visibility after sync(), the bytes a sync moves against the
// database's size and the server's CPU and time per sync.
package embedded
