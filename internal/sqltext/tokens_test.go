package sqltext

import "testing"

func TestTokens(t *testing.T) {
	toks := Tokens("ALTER TABLE \"my \"\"t\"\" \" /* c */ ALTER COLUMN [a b] TO `x` -- tail\n TEXT DEFAULT 'it''s';")
	var words, names []string
	for _, tk := range toks {
		words = append(words, tk.Word())
		names = append(names, tk.Name())
	}
	wantNames := []string{"ALTER", "TABLE", `my "t" `, "ALTER", "COLUMN", "a b", "TO", "x", "TEXT", "DEFAULT", "it's", ";"}
	if len(names) != len(wantNames) {
		t.Fatalf("tokens %q, want %q", names, wantNames)
	}
	for i := range names {
		if names[i] != wantNames[i] {
			t.Errorf("token %d: %q, want %q", i, names[i], wantNames[i])
		}
	}
	if words[0] != "ALTER" || words[2] != "" || words[5] != "" || words[11] != "" {
		t.Errorf("words %q", words)
	}
}
