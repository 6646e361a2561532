package suggest

import "testing"

func TestClosest(t *testing.T) {
	cands := []string{"replicate", "restore", "run", "serve", "version"}
	for word, want := range map[string]string{
		"replciate": "replicate", "restor": "restore", "serv": "serve", "rn": "run",
		"xyzzy": "", "versoin": "version",
	} {
		if got := Closest(word, cands); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
}
