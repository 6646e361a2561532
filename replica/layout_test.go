package replica_test

import (
	"testing"

	"github.com/superfly/ltx"

	"github.com/sluicedb/sluice/replica"
)

func TestLTXKeyRoundTrip(t *testing.T) {
	key := replica.LTXKey(3, 0x10, 0x2a)
	if key != "ltx/3/0000000000000010-000000000000002a.ltx" {
		t.Fatalf("LTXKey = %q, not Litestream v0.5's layout", key)
	}
	level, min, max, err := replica.ParseLTXKey("some/prefix/" + key)
	if err != nil || level != 3 || min != 0x10 || max != 0x2a {
		t.Fatalf("ParseLTXKey = %d %v %v %v", level, min, max, err)
	}
	for _, bad := range []string{
		"ltx/10/0000000000000001-0000000000000001.ltx", // level out of range
		"ltx/x/0000000000000001-0000000000000001.ltx",
		"ltx/0/1-2.ltx",
		"ltx/0/0000000000000001-0000000000000001.ltx.tmp",
		"snap/0/0000000000000001-0000000000000001.ltx",
		"0000000000000001-0000000000000001.ltx",
	} {
		if _, _, _, err := replica.ParseLTXKey(bad); err == nil {
			t.Errorf("ParseLTXKey(%q) succeeded, want an error", bad)
		}
	}
}

func TestLatest(t *testing.T) {
	if _, ok := replica.Latest(make([][]replica.LTXFile, 10)); ok {
		t.Fatal("Latest of an empty replica reported a file")
	}
	levels := [][]replica.LTXFile{
		{{Level: 0, MinTXID: 5, MaxTXID: 5}, {Level: 0, MinTXID: 6, MaxTXID: 7}},
		{{Level: 1, MinTXID: 1, MaxTXID: 7}},
		nil, nil, nil, nil, nil, nil, nil,
		{{Level: 9, MinTXID: 1, MaxTXID: 4}},
	}
	f, ok := replica.Latest(levels)
	if !ok || f.MaxTXID != ltx.TXID(7) || f.Level != 0 {
		t.Fatalf("Latest = %+v, %v; want level 0 file ending at 7 (lowest level wins ties)", f, ok)
	}
}
