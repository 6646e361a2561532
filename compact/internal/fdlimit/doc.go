// Package fdlimit tests compaction of a file:// replica in a test binary
// whose descriptor limit is lowered (as under `ulimit -n`): merging thousands
// of level-0 files must never need a descriptor per input.
//
// It has no code of its own; its test imports compact, restore and the file
// backend.
package fdlimit
