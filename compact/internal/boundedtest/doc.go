// Package boundedtest holds compaction's load tests against a real MinIO:
// thousands of level-0 files merged with bounded fan-in, and uploads that
// keep being acknowledged while such a merge runs against a slow store.
//
// It has no code of its own; its tests import compact, engine, restore and
// the replica backends.
package boundedtest
