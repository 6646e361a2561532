package cliflag

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func newSet() (*flag.FlagSet, *time.Duration, *int) {
	fs := flag.NewFlagSet("sluice restore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	d := fs.Duration("interval", time.Second, "how often")
	n := fs.Int("page-size", 4096, "bytes")
	Humanize(fs)
	return fs, d, n
}

func TestParseTakesFlagsAfterArgumentsInHumanUnits(t *testing.T) {
	fs, d, n := newSet()
	pos, err := Parse(fs, []string{"URL", "-interval", "7d", "-page-size", "8KiB", "--", "-x"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pos, " ") != "URL -x" || *d != 7*24*time.Hour || *n != 8192 || !IsSet(fs, "interval") {
		t.Fatalf("pos %q interval %s page-size %d", pos, *d, *n)
	}
}

func TestParseStopsAtTheFirstArgumentWhenAskedTo(t *testing.T) {
	fs, _, _ := newSet()
	pos, err := Parse(fs, []string{"serve", "-interval", "1s"}, true, nil)
	if err != nil || strings.Join(pos, " ") != "serve -interval 1s" || IsSet(fs, "interval") {
		t.Fatalf("pos %q err %v", pos, err)
	}
}

func TestParseRefusesAMistypedFlagWithTheNearest(t *testing.T) {
	fs, _, _ := newSet()
	_, err := Parse(fs, []string{"-intreval", "1s"}, false, nil)
	var ue UsageError
	if !errors.As(err, &ue) || ue.Cmd != "restore" || !strings.Contains(ue.Msg, "did you mean -interval?") {
		t.Fatalf("err %#v", err)
	}
}

func TestPrintDefaultsNamesHumanTypes(t *testing.T) {
	fs, _, _ := newSet()
	var b strings.Builder
	PrintDefaults(&b, fs)
	if !strings.Contains(b.String(), "-interval duration") || !strings.Contains(b.String(), "-page-size size") {
		t.Fatalf("%s", b.String())
	}
}
