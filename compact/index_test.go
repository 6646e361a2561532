package compact

import (
	"testing"
	"time"
	"unsafe"

	"github.com/sluicedb/sluice/replica"
)

// An index entry derives its key from the level and TXIDs, and keeps the
// name it was listed under only when that name is not the canonical one
// (a file another tool wrote), so deletes and reads still find it.
func TestIndexEntryKeepsOnlyUnusualKeys(t *testing.T) {
	now := time.Unix(1700000000, 123)
	canonical := replica.LTXFile{Level: 0, MinTXID: 5, MaxTXID: 9, Size: 100, Key: replica.LTXKey(0, 5, 9)}
	e := newEntry(canonical, now)
	if e.oddKey != "" || e.Key() != canonical.Key || e.file() != canonical || !e.written().Equal(now) {
		t.Fatalf("canonical entry %+v gives key %q, file %+v, written %v", e, e.Key(), e.file(), e.written())
	}
	odd := canonical
	odd.Key = "old/" + canonical.Key
	if e := newEntry(odd, now); e.Key() != odd.Key || e.file() != odd {
		t.Fatalf("entry listed as %q answers key %q", odd.Key, e.Key())
	}
	// A replica under load holds hundreds of thousands of these.
	if size := unsafe.Sizeof(entry{}); size > 64 {
		t.Fatalf("an index entry takes %d bytes", size)
	}
}
