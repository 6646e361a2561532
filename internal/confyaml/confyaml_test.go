package confyaml

import (
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/units"
)

type inner struct {
	MaxBodySize units.Size     `yaml:"max-body-size"`
	Timeout     units.Duration `yaml:"statement-timeout"`
}

type shared struct {
	Region string `yaml:"region"`
}

type sample struct {
	shared `yaml:",inline"`
	Addr   string  `yaml:"addr"`
	Limits inner   `yaml:"limits"`
	Items  []inner `yaml:"items"`
}

func TestDecodeAcceptsBothKeyStylesAndHumanUnits(t *testing.T) {
	t.Setenv("SLUICE_TEST_ADDR", ":9090")
	var s sample
	err := Decode([]byte(`
addr: ${SLUICE_TEST_ADDR}
region: eu
limits:
  max_body_size: 8MiB
  statement-timeout: 1m30s
items:
  - statement_timeout: 7d
`), &s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr != ":9090" || s.Region != "eu" || s.Limits.MaxBodySize != 8<<20 || s.Limits.Timeout.String() != "1m30s" || s.Items[0].Timeout.String() != "7d" {
		t.Fatalf("decoded %+v", s)
	}
}

func TestDecodeNoExpandEnvKeepsDollar(t *testing.T) {
	var s sample
	if err := Decode([]byte("addr: pa$$word$X\n"), &s, Options{NoExpandEnv: true}); err != nil {
		t.Fatal(err)
	}
	if s.Addr != "pa$$word$X" {
		t.Fatalf("addr = %q", s.Addr)
	}
}

func TestDecodeRefusesUnknownKeyWithSuggestion(t *testing.T) {
	var s sample
	err := Decode([]byte("limits:\n  statement-timout: 5s\n"), &s, Options{})
	if err == nil || !strings.Contains(err.Error(), `did you mean "statement-timeout"`) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v", err)
	}
	// A nested key given at the top level (as its flag is named) says where it goes.
	for body, want := range map[string]string{
		"statement-timeout: 5s\n":        `(it goes under "limits": limits: {statement-timeout: …})`,
		"limits-statement-timeout: 5s\n": `(it goes under "limits": limits: {statement-timeout: …})`,
	} {
		if err := Decode([]byte(body), &s, Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
	err = Decode([]byte("limits:\n  statement-timeout: 5\n"), &s, Options{})
	if err == nil || !strings.Contains(err.Error(), "no unit") {
		t.Fatalf("a bare number was accepted as a duration: %v", err)
	}
}

// A serve config whose replica or token comes from a variable that is not
// set must not run with an empty value; a "$" in a comment is no reference.
func TestDecodeUnsetIsErrorNamesTheVariables(t *testing.T) {
	t.Setenv("SLUICE_TEST_SET", "s3://b/app")
	raw := []byte("# costs $5 a month, see $NOT_A_REFERENCE\naddr: ${SLUICE_TEST_SET}\nregion: $SLUICE_TEST_UNSET_A-$SLUICE_TEST_UNSET_B\n")
	var s sample
	err := Decode(raw, &s, Options{UnsetIsError: true})
	if err == nil || err.Error() != "$SLUICE_TEST_UNSET_A, $SLUICE_TEST_UNSET_B are not set (set them, or give -no-expand-env to read $ literally)" {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("SLUICE_TEST_UNSET_A", "eu")
	t.Setenv("SLUICE_TEST_UNSET_B", "1")
	if err := Decode(raw, &s, Options{UnsetIsError: true}); err != nil || s.Addr != "s3://b/app" || s.Region != "eu-1" {
		t.Fatalf("decoded %+v, err %v", s, err)
	}
	// Without the option, as Litestream does: unset expands to nothing.
	s = sample{}
	if err := Decode([]byte("addr: x${SLUICE_TEST_UNSET_C}y\n"), &s, Options{}); err != nil || s.Addr != "xy" {
		t.Fatalf("decoded %+v, err %v", s, err)
	}
}
