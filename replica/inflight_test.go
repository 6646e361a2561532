package replica

import (
	"testing"

	"github.com/superfly/ltx"
)

func l0(txids ...ltx.TXID) []LTXFile {
	var fs []LTXFile
	for _, x := range txids {
		fs = append(fs, LTXFile{Level: 0, MinTXID: x, MaxTXID: x, Key: LTXKey(0, x, x)})
	}
	return fs
}

// What a restore may take for uploads in flight past a gap, and what it
// must take for damage.
func TestInFlightTailIsOnlyTheNewestFilesWithinThePipeline(t *testing.T) {
	upper := func(min, max ltx.TXID) []LTXFile {
		return []LTXFile{{Level: 1, MinTXID: min, MaxTXID: max, Key: LTXKey(1, min, max)}}
	}
	for _, c := range []struct {
		name   string
		levels [][]LTXFile
		end    ltx.TXID
		tail   int
	}{
		{"contiguous", [][]LTXFile{l0(1, 2, 3, 4)}, 4, 0},
		{"N+1 and N+3 past a missing N", [][]LTXFile{l0(1, 2, 3, 5, 7)}, 3, 2},
		{"above a compacted range", [][]LTXFile{l0(11, 13), upper(1, 10)}, 11, 1},
		{"a file MaxInFlight past the gap: damage", [][]LTXFile{l0(1, 2, 3, 5, 4+MaxInFlight)}, 3, 0},
		{"a compacted file past the gap: damage", [][]LTXFile{l0(1, 2, 3), nil, upper(5, 6)}, 6, 0},
		{"no history below the gap", [][]LTXFile{l0(2, 3)}, 0, 0},
	} {
		end, tail := InFlightTail(c.levels)
		if len(tail) != c.tail || (c.tail > 0 && end != c.end) {
			t.Errorf("%s: end %d, tail %v; want end %d and %d files", c.name, end, tail, c.end, c.tail)
		}
	}
}
