package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every string encodes byte for byte as encoding/json encodes it.
func TestMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		"", "plain ascii", `quote " and backslash \`, "tab\tnewline\ncr\r", "nul\x00 bell\x07 unit\x1f del\x7f",
		"<script>&amp;</script>", "é, 日本語, emoji 🎉", "line sep \u2028 para sep \u2029",
		"bad utf-8 \xff\xfe here", "truncated \xe6\x97", strings.Repeat("long text without escapes ", 50),
	}
	for b := 0; b < 256; b++ {
		cases = append(cases, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); string(got) != string(want) {
			t.Errorf("Append(%q) = %s, want %s", s, got, want)
		}
		if got := AppendBytes([]byte("prefix:"), []byte(s)); string(got) != "prefix:"+string(want) {
			t.Errorf("AppendBytes(%q) = %s, want prefix:%s", s, got, want)
		}
	}
}

// Appending to a slice with room allocates nothing.
func TestNoAllocation(t *testing.T) {
	buf := make([]byte, 0, 4096)
	s := "a post of some length, with \"quotes\" and <tags> & more"
	if n := testing.AllocsPerRun(100, func() { buf = Append(buf[:0], s) }); n != 0 {
		t.Fatalf("%v allocations per Append", n)
	}
}

func BenchmarkAppend(b *testing.B) {
	s := strings.Repeat("A post on the board: enough words. ", 6)
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = Append(buf[:0], s)
	}
}
