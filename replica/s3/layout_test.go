package s3

import (
	"strings"
	"testing"
)

func TestLitestreamS3KeyMapping(t *testing.T) {
	cases := []struct{ store, s3 string }{
		{"ltx/0/0000000000000001-0000000000000002.ltx", "0000/0000000000000001-0000000000000002.ltx"},
		{"ltx/9/", "0009/"},
		{"app/ltx/3/00000000000000a0-00000000000000ff.ltx", "app/0003/00000000000000a0-00000000000000ff.ltx"},
		{"sluice/lease", "sluice/lease"},
		{"ltx/1x", "ltx/1x"},
		{"ltx/10/zzz", "ltx/10/zzz"},
		{"ltx/1/not-an-ltx-name", "ltx/1/not-an-ltx-name"},
	}
	for _, c := range cases {
		if got := toLitestreamS3Key(c.store); got != c.s3 {
			t.Errorf("toLitestreamS3Key(%q) = %q, want %q", c.store, got, c.s3)
		}
		if strings.HasSuffix(c.s3, "/") {
			continue // a listing prefix: only mapped one way
		}
		if got := fromLitestreamS3Key(c.s3); got != c.store {
			t.Errorf("fromLitestreamS3Key(%q) = %q, want %q", c.s3, got, c.store)
		}
	}
	for prefix, want := range map[string]string{"ltx": "", "ltx/": "", "ltx/1": "", "db/ltx/": "db/", "db/ltx/2": "db/"} {
		if dir, ok := partialLTXPrefix(prefix); !ok || dir != want {
			t.Errorf("partialLTXPrefix(%q) = %q, %v; want %q, true", prefix, dir, ok, want)
		}
	}
	for _, prefix := range []string{"ltx/1/", "db/ltx/0/", "ltxfoo", "sluice/"} {
		if _, ok := partialLTXPrefix(prefix); ok {
			t.Errorf("partialLTXPrefix(%q) should map directly", prefix)
		}
	}
}
